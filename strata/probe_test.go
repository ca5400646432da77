package strata

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stratakernels/strata/metal/mtl"
)

// macOS13Device is the emulator with macOS 13's Metal compiler: MSL 3.1, the kernels' language,
// is refused.
type macOS13Device struct{ mtl.Device }

func (d macOS13Device) NewLibrary(name, source string, opts mtl.CompileOptions) (mtl.Library, error) {
	if opts.LanguageVersion > 3<<16 {
		return nil, fmt.Errorf("%s: language version %s is not supported on this OS: %w", name, opts.LanguageVersion, mtl.ErrCompile)
	}
	return d.Device.NewLibrary(name, source, opts)
}

// intelMacDevice is the emulator reporting no Apple GPU family (an Intel Mac's AMD GPU).
type intelMacDevice struct{ mtl.Device }

func (intelMacDevice) SupportsFamily(mtl.GPUFamily) bool { return false }

// TestAutoProbe: backend auto takes a Metal device only where metal.Probe passes: a device whose
// compiler refuses the kernels' MSL 3.1, or of no Apple7-or-later family, leaves the CPU chosen,
// and the kernels line and the log say why; backend metal on such a device fails with
// ErrUnsupported saying why.
func TestAutoProbe(t *testing.T) {
	for _, c := range []struct {
		dev  mtl.Device
		want string
	}{
		{macOS13Device{emuDevice(t)}, "does not compile the kernels' language (MSL 3.1"},
		{intelMacDevice{emuDevice(t)}, "not an Apple GPU of family Apple7"},
	} {
		var logs []string
		d, err := Open(Options{Backend: "auto", MetalDevice: c.dev, Log: func(_ LogLevel, msg string) { logs = append(logs, msg) }})
		if err != nil {
			t.Fatalf("%T: %v", c.dev, err)
		}
		if d.Backend() != "cpu" {
			t.Errorf("%T: backend %s, want cpu", c.dev, d.Backend())
		}
		if k := d.Kernels(); !strings.Contains(k, "metal not taken: ") || !strings.Contains(k, c.want) {
			t.Errorf("%T: kernels line %q does not say why metal was not taken (%q)", c.dev, k, c.want)
		}
		if l := strings.Join(logs, "\n"); !strings.Contains(l, "auto -> cpu") || !strings.Contains(l, c.want) {
			t.Errorf("%T: log %q does not give the choice and why", c.dev, l)
		}
		d.Close()
		if _, err := Open(Options{Backend: "metal", MetalDevice: c.dev}); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%T: backend metal: %v, want ErrUnsupported saying %q", c.dev, err, c.want)
		}
	}
	d, err := Open(Options{Backend: "auto", MetalDevice: emuDevice(t)})
	if err != nil || d.Backend() != "emu" || strings.Contains(d.Kernels(), "not taken") {
		t.Fatalf("auto on the emulator: %v, %v; want emu", d, err)
	}
	d.Close()
}
