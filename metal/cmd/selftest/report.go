package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stratakernels/strata/strata"
)

// Row statuses.
const (
	statusPass = "pass"
	statusFail = "fail"
	statusSkip = "skip"
)

// maxFailures bounds the failure list of the report (one broken kernel fails many cases).
const maxFailures = 60

// row is one line of the report (and one object of --json).
type row struct {
	Kernel  string   `json:"kernel"`
	Variant string   `json:"variant"`
	TG      *int     `json:"threadgroup_bytes"`
	Status  string   `json:"status"`
	Err     *float64 `json:"max_rel_err"`
	MS      *float64 `json:"ms"`
	// MaxThreads is a pipeline's maxTotalThreadsPerThreadgroup (pipeline rows only).
	MaxThreads *int   `json:"max_threads,omitempty"`
	Note       string `json:"-"`
}

// section is a titled table of rows.
type section struct {
	title string
	rows  []row
}

func intp(n int) *int           { return &n }
func floatp(x float64) *float64 { return &x }

// row is the report row of an aggregate of cases.
func (a *caseAgg) row(kernel, variant string) row {
	r := row{Kernel: kernel, Variant: variant, Status: statusPass, Err: floatp(a.maxErr)}
	if len(a.failed) > 0 {
		r.Status = statusFail
		r.Note = fmt.Sprintf("%d of %d cases failed", len(a.failed), a.cases)
	}
	if a.cases == 0 {
		r.Status, r.Err, r.Note = statusFail, nil, "no case ran"
	}
	return r
}

// perCore is the threadgroups one core holds by threadgroup memory (32 KiB a core).
func perCore(tg *int) string {
	if tg == nil {
		return ""
	}
	if *tg == 0 {
		return "-"
	}
	return fmt.Sprint(32768 / *tg)
}

// write prints the Markdown report and the JSON rows; it returns the number of failed rows.
func (st *selftest) write(t *testing.T) int {
	var b strings.Builder
	b.WriteString("# strata Metal self-test\n\n")
	for _, h := range st.header {
		fmt.Fprintf(&b, "- **%s**: %s\n", h[0], h[1])
	}
	var all []row
	failed, skipped := 0, 0
	for _, s := range st.sections {
		fmt.Fprintf(&b, "\n## %s\n\n", s.title)
		b.WriteString("| kernel | variant | threadgroup B | per core | status | max rel err | ms | note |\n")
		b.WriteString("| --- | --- | ---: | ---: | --- | ---: | ---: | --- |\n")
		for _, r := range s.rows {
			tg, e, m := "", "", ""
			if r.TG != nil {
				tg = fmt.Sprint(*r.TG)
			}
			if r.Err != nil {
				e = fmt.Sprintf("%.2g", *r.Err)
			}
			if r.MS != nil {
				m = fmt.Sprintf("%.3f", *r.MS)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Kernel, r.Variant, tg, perCore(r.TG), r.Status, e, m, r.Note)
			switch r.Status {
			case statusFail:
				failed++
			case statusSkip:
				skipped++
			}
			all = append(all, r)
		}
	}
	fmt.Fprintf(&b, "\n## Result\n\n%d rows: %d failed, %d skipped.\n", len(all), failed, skipped)
	if len(st.failures) > 0 {
		b.WriteString("\nFailures:\n\n")
		for i, f := range st.failures {
			if i == maxFailures {
				fmt.Fprintf(&b, "- and %d more (stderr has every failure's details)\n", len(st.failures)-i)
				break
			}
			fmt.Fprintf(&b, "- %s\n", f)
		}
	}
	fmt.Fprint(st.report, b.String())
	if st.jsonPath != "" {
		js, err := json.MarshalIndent(all, "", "  ")
		if err == nil {
			// Written whole through a temporary, as strata writes every output file.
			err = strata.WriteFile(st.jsonPath, func(w io.Writer) error {
				_, err := w.Write(append(js, '\n'))
				return err
			})
		}
		if err != nil {
			t.Errorf("--json %s: %v", st.jsonPath, err)
		}
	}
	return failed
}
