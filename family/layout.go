package family

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/internal/safetensors"
)

// Prefix is one way a family's checkpoints name the text model: Text is the prefix of its
// tensors ("model.", "model.language_model.", "language_model.model."), LMHead the output
// projection's full name, and MLXOnly marks a prefix only MLX conversions use (mlx-vlm's).
type Prefix struct {
	Text, LMHead string
	MLXOnly      bool
	// Skipped are the groups a checkpoint of this prefix may carry and the model does not run.
	Skipped []Skip
}

// ExpertStorage is how a checkpoint stores the routed experts.
type ExpertStorage int

// Expert storages.
const (
	// PerExpert: one tensor per expert and projection, mlp.experts.{e}.{gate,up,down}_proj.weight
	// ([I, D], [I, D], [D, I]): the published Hugging Face files.
	PerExpert ExpertStorage = iota
	// Fused: mlp.experts.gate_up_proj [E, 2I, D] (gate rows first) and mlp.experts.down_proj
	// [E, D, I]: transformers 5's own layout (the published Qwen3.8-Flash-Next and Qwen3.5 files;
	// a save splits them again where the model's conversion mapping fused per-expert tensors).
	Fused
	// Stacked: mlp.switch_mlp.{gate,up}_proj.weight [E, I, D] and down_proj [E, D, I], as MLX
	// conversions store them.
	Stacked
)

func (e ExpertStorage) String() string {
	return [...]string{"per expert", "fused", "stacked under switch_mlp"}[e]
}

// Layout is how one checkpoint names and stores its tensors, decided once from its names,
// shapes and metadata (DetectLayout).
type Layout struct {
	Prefix
	Experts ExpertStorage
	// NGramParts > 1: each PLE n-gram table is stored as that many equal row blocks.
	NGramParts int
	// MLX: an MLX conversion (conv1d weights [C, K, 1], quantized modules where <module>.scales
	// exists).
	MLX bool
	// ShiftedGains: the zero-centred norm gains (applied as 1 + w) are stored as 1 + w, as
	// mlx-lm's and mlx-vlm's sanitize write them for the families that fold the offset; the
	// plan's Vec.Shifted follows it. DetectLayout sets it with MLX; a family whose conversions
	// exist in both conventions decides it in DetectMore from the checkpoint's signals, with
	// GainsWhy saying which signals and what they read.
	ShiftedGains bool
	GainsWhy     string
	// GGUF is the llama.cpp architecture of a GGUF file ("qwen35moe"), "" for a safetensors
	// checkpoint: its tensors carry llama.cpp's names (family.GGUFPlan).
	GGUF string
}

// Layer returns the name of a tensor of decoder layer i, e.g. "model.layers.3.self_attn.q_proj.weight".
func (l Layout) Layer(i int, suffix string) string {
	return l.Text + "layers." + strconv.Itoa(i) + "." + suffix
}

// Model returns the name of a model-level tensor, e.g. Model("embed_tokens.weight").
func (l Layout) Model(suffix string) string { return l.Text + suffix }

// ConvShape is the stored shape of a depthwise conv1d weight of C channels and kernel K:
// [C, 1, K] as transformers stores it, [C, K, 1] in an MLX conversion. Both hold the kernel of
// channel c at [c*K, (c+1)*K) in memory.
func (l Layout) ConvShape(C, K int) []int64 {
	if l.MLX {
		return []int64{int64(C), int64(K), 1}
	}
	return []int64{int64(C), 1, int64(K)}
}

// Describe names the layout for reports: "prefix model., experts per expert", with the MLX
// conversion's storage rules when it is one.
func (l Layout) Describe() string {
	if l.GGUF != "" {
		return "GGUF, llama.cpp architecture " + l.GGUF + " (llama.cpp's tensor names, zero-centred norms stored as 1 + w, A_log as -exp(A_log))"
	}
	s := "prefix " + l.Text
	if l.Experts != PerExpert || l.MLX {
		s += ", experts " + l.Experts.String()
	}
	if l.MLX {
		s += ", MLX conversion (conv1d [C, K, 1])"
	}
	if l.ShiftedGains {
		s += ", zero-centred norms stored as 1 + w"
	}
	return s
}

// Table is a checkpoint's tensor table as DetectLayout reads it: the names, shapes and files, and
// the values of small float tensors (Values: read from the files even when only their headers
// are open, for the norm gains whose stored values tell conventions apart). A Table without
// Values (nil) offers no values.
type Table struct {
	Names  []string
	Shapes map[string][]int64
	Files  []*safetensors.File
	Values func(name string) ([]float32, error)
}

var (
	switchRe    = regexp.MustCompile(`layers\.\d+\.mlp\.switch_mlp\.(gate|up|down)_proj\.weight$`)
	perExpertRe = regexp.MustCompile(`layers\.\d+\.mlp\.experts\.\d+\.(gate|up|down)_proj\.weight$`)
	fusedRe     = regexp.MustCompile(`layers\.\d+\.mlp\.experts\.(gate_up|down)_proj$`)
	convRe      = regexp.MustCompile(`layers\.\d+\.linear_attn\.conv1d\.weight$`)
)

func skippedBy(skips []Skip, name string) bool {
	for _, s := range skips {
		if strings.HasPrefix(name, s.Prefix) {
			return true
		}
	}
	return false
}

// allSkips is every skip group the family's prefixes name (a name skipped under any prefix is
// not evidence of another one).
func allSkips(f Family) []Skip {
	var out []Skip
	for _, p := range f.Prefixes() {
		out = append(out, p.Skipped...)
	}
	return out
}

// DetectLayout decides a checkpoint's layout from its tensor names, shapes and files: the text
// prefix among the family's Prefixes (exactly one must hold decoder layers or the embedding), the
// expert storage from the expert tensor names, and whether it is an MLX conversion from every
// signal it carries (the safetensors metadata format "mlx" or transformers' "pt", an MLX
// quantization block, the expert storage, the shape of linear_attn.conv1d.weight, mtp.* tensors
// which MLX conversions drop, a prefix only MLX uses). Signals pointing both ways are an error:
// the two store the zero-centred norms differently (1 + w against w), and reading one as the other
// doubles those norms silently. Errors wrap hfconfig.ErrTensors.
func DetectLayout(c *hfconfig.Config, t Table) (Layout, error) {
	names, shapes, files := t.Names, t.Shapes, t.Files
	f := Of(c)
	skips := allSkips(f)
	var found []Prefix
	for _, p := range f.Prefixes() {
		for _, n := range names {
			if !skippedBy(skips, n) && (strings.HasPrefix(n, p.Text+"layers.") || strings.HasPrefix(n, p.Text+"embed_tokens.")) {
				found = append(found, p)
				break
			}
		}
	}
	var l Layout
	switch len(found) {
	case 1:
		l.Prefix = found[0]
	case 0:
		var want []string
		for _, p := range f.Prefixes() {
			want = append(want, p.Text+"layers.*")
		}
		return l, fmt.Errorf("%w: no %s tensors among %d names", hfconfig.ErrTensors, strings.Join(want, " or "), len(names))
	default:
		return l, fmt.Errorf("%w: names under both %s and %s", hfconfig.ErrTensors, found[0].Text, found[1].Text)
	}
	var fused, perExpert, stacked bool
	for _, n := range names {
		if skippedBy(skips, n) || !strings.HasPrefix(n, l.Text) {
			continue
		}
		fused = fused || fusedRe.MatchString(n)
		perExpert = perExpert || perExpertRe.MatchString(n)
		stacked = stacked || switchRe.MatchString(n)
	}
	if btoi(fused)+btoi(perExpert)+btoi(stacked) > 1 {
		return l, fmt.Errorf("%w: expert tensors in more than one layout: fused (mlp.experts.gate_up_proj) %v, per expert (mlp.experts.{e}.*) %v, stacked (mlp.switch_mlp.*) %v",
			hfconfig.ErrTensors, fused, perExpert, stacked)
	}
	switch {
	case fused:
		l.Experts = Fused
	case stacked:
		l.Experts = Stacked
	}
	mlx, err := detectMLX(c, l, names, shapes, files)
	if err != nil {
		return l, err
	}
	l.MLX = mlx
	l.ShiftedGains = mlx
	if d, ok := f.(LayoutDetector); ok {
		if err := d.DetectMore(c, &l, t); err != nil {
			return l, err
		}
	}
	return l, nil
}

// LayoutDetector is implemented by families whose layouts carry more than DetectLayout decides
// (how many row blocks a table is split into, how an MLX conversion stores the zero-centred
// gains); DetectMore completes l from the table. Errors wrap hfconfig.ErrTensors.
type LayoutDetector interface {
	DetectMore(c *hfconfig.Config, l *Layout, t Table) error
}

// detectMLX weighs the MLX and Hugging Face signals of a checkpoint.
func detectMLX(c *hfconfig.Config, l Layout, names []string, shapes map[string][]int64, files []*safetensors.File) (bool, error) {
	var mlx, hf []string
	formats := map[string][]string{}
	for _, f := range files {
		formats[f.Metadata["format"]] = append(formats[f.Metadata["format"]], baseName(f.Path))
	}
	fileSignal := func(format string) string {
		fs := formats[format]
		if len(fs) == 1 {
			return fmt.Sprintf("%s metadata format %q", fs[0], format)
		}
		return fmt.Sprintf("metadata format %q in %d of %d files (%s, ...)", format, len(fs), len(files), fs[0])
	}
	if len(formats["mlx"]) > 0 {
		mlx = append(mlx, fileSignal("mlx"))
	}
	if len(formats["pt"]) > 0 {
		hf = append(hf, fileSignal("pt"))
	}
	if l.MLXOnly {
		mlx = append(mlx, "tensor names under "+l.Text+" (an MLX conversion's prefix)")
	}
	if c.Quant != nil {
		mlx = append(mlx, "config.json quantization block without quant_method")
	}
	if c.FP8 != nil {
		hf = append(hf, "config.json quantization_config with quant_method fp8 (a Hugging Face FP8 release)")
	}
	moe := false
	for i := range c.LayerTypes {
		moe = moe || c.IsMoELayer(i)
	}
	switch {
	case l.Experts == Stacked:
		mlx = append(mlx, "experts stacked under mlp.switch_mlp")
	case l.Experts == Fused:
		hf = append(hf, "experts under mlp.experts.gate_up_proj")
	case moe:
		hf = append(hf, "experts stored one by one (mlp.experts.{e}.*)")
	}
	if c.ConvK > 1 {
		for _, n := range names {
			if !strings.HasPrefix(n, l.Text) || !convRe.MatchString(n) {
				continue
			}
			if s := shapes[n]; len(s) == 3 {
				switch {
				case s[1] == int64(c.ConvK) && s[2] == 1:
					mlx = append(mlx, fmt.Sprintf("%s %v (channels, kernel, 1)", n, s))
				case s[1] == 1 && s[2] == int64(c.ConvK):
					hf = append(hf, fmt.Sprintf("%s %v (channels, 1, kernel)", n, s))
				}
			}
			break // the first GDN layer speaks for all: the tensor check holds the others to its shape
		}
	}
	// mlx-lm drops mtp.* from its qwen3_next conversions; under a prefix only MLX conversions
	// use, the names already say MLX, and some such files keep the head (mlx-lm #1623).
	if !l.MLXOnly {
		for _, n := range names {
			if strings.HasPrefix(n, "mtp.") {
				hf = append(hf, "mtp.* tensors (MLX conversions drop them)")
				break
			}
		}
	}
	slices.Sort(mlx)
	mlx = slices.Compact(mlx)
	slices.Sort(hf)
	hf = slices.Compact(hf)
	if len(mlx) > 0 && len(hf) > 0 {
		return false, fmt.Errorf("%w: the checkpoint is neither clearly an MLX conversion nor a Hugging Face checkpoint (the two store the zero-centred norms differently, 1 + w against w): MLX signals: %s; Hugging Face signals: %s",
			hfconfig.ErrTensors, strings.Join(mlx, ", "), strings.Join(hf, ", "))
	}
	return len(mlx) > 0, nil
}

func baseName(p string) string { return p[strings.LastIndexAny(p, `/\`)+1:] }

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
