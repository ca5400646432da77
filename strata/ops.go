package strata

import "github.com/stratakernels/strata/op"

// Op entry points for hosts that run their own model and want strata's kernels on a device: the
// Go side of the C ABI's strata_attention, strata_gdn_scan and strata_moe_combine (and Python's
// strata.attention, gdn_scan, moe_combine). Tensors are host memory (op.HostF32 / op.HostI32).
// Each call checks its arguments (the op's Check and the host data the op reads as indices)
// before any work, runs the op in one Pass of the device's backend (on cpu in place; on metal
// and emu the inputs are copied into device tensors, the Metal kernel runs, and the outputs are
// copied back), and leaves the outputs unwritten on error. Device.Kernels names the kernel
// variants that ran. Errors wrap ErrShape, ErrDType, ErrInvalidArgument, ErrUnsupported (a
// shape the backend's kernels do not take) or ErrBackend.

// Attention runs op.Attention (causal, optionally QSA-sparse GQA over a K/V cache) on d. With a
// selection, a.Sel is its layout and a.Tok its tokens, checked (ascending, causal) first.
func (d *Device) Attention(a op.Attention) error {
	if err := a.Check(); err != nil {
		return err
	}
	if a.Sel != nil {
		if err := a.Sel.CheckTokens("attention", a.P.T, a.P.Pos0, a.Tok.I32()); err != nil {
			return err
		}
	}
	return d.exec(func(p op.Pass) error { return p.Attention(a) }, &a)
}

// GDNScan runs op.GDNScan (the gated delta rule with its state) on d. With a.NormQK the backend
// l2-normalises q and k per head first (q also scaled by Dk^-0.5, as GDNPre does) on the device:
// the caller's q and k are not modified.
func (d *Device) GDNScan(a op.GDNScan) error {
	if err := a.Check(); err != nil {
		return err
	}
	return d.exec(func(p op.Pass) error { return p.GDNScan(a) }, &a)
}

// MoECombine runs op.MoECombine on d and, when shared [T, D] is given, adds it to the result in
// the same Pass (the gated shared-expert output). The slot rows are checked first.
func (d *Device) MoECombine(a op.MoECombine, shared op.Tensor) error {
	if err := a.Check(); err != nil {
		return err
	}
	if err := a.CheckSlots(a.RK.I32()); err != nil {
		return err
	}
	if !op.Present(shared) {
		return d.exec(func(p op.Pass) error { return p.MoECombine(a) }, &a)
	}
	add := op.Add{H: a.Out, U: shared}
	if err := add.Check(); err != nil {
		return err
	}
	return d.exec(func(p op.Pass) error {
		if err := p.MoECombine(a); err != nil {
			return err
		}
		return p.Add(add)
	}, &a, &add)
}

// GRApplyMoEC runs op.GRApplyMoEC (the MoE combine fused into the GatedResidual write, with the
// next read's norm when a.Hn is given) on d. The slot rows are checked first.
func (d *Device) GRApplyMoEC(a op.GRApplyMoEC) error {
	if err := a.Check(); err != nil {
		return err
	}
	if err := a.CheckSlots(a.RK.I32()); err != nil {
		return err
	}
	return d.exec(func(p op.Pass) error { return p.GRApplyMoEC(a) }, &a)
}

// exec runs ops over host tensors on d's backend (op.Exec), wrapping failures in ErrBackend
// unless they carry a sentinel of their own.
func (d *Device) exec(run func(op.Pass) error, args ...any) error {
	if _, err := op.Exec(d.be, run, args...); err != nil {
		return wrapf(ErrBackend, err, "%s backend", d.be.Name())
	}
	return nil
}
