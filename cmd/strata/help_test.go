package main

import (
	"bytes"
	"errors"
	"flag"
	"regexp"
	"strings"
	"testing"
)

// TestHelpGroups: -help lists every flag of the command once, under one of the group headings,
// and returns flag.ErrHelp (exit status 0); an undefined flag is a usage error.
func TestHelpGroups(t *testing.T) {
	o := newOptions("strata")
	var out bytes.Buffer
	o.fs.SetOutput(&out)
	if err := o.parse([]string{"-help"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-help: %v, want flag.ErrHelp", err)
	}
	help := out.String()
	headings := regexp.MustCompile(`(?m)^[A-Za-z][^:\n]*:$`).FindAllString(help, -1)
	if len(headings) != len(o.groups) {
		t.Errorf("headings %q, want the %d groups", headings, len(o.groups))
	}
	n := 0
	o.fs.VisitAll(func(f *flag.Flag) {
		n++
		if c := len(regexp.MustCompile(`(?m)^  -`+regexp.QuoteMeta(f.Name)+`[ \t\n]`).FindAllString(help, -1)); c != 1 {
			t.Errorf("-%s listed %d times in -help", f.Name, c)
		}
	})
	if got := strings.Count(help, "\n  -"); got != n {
		t.Errorf("-help lists %d flags, the command has %d", got, n)
	}
	o = newOptions("strata")
	o.fs.SetOutput(&out)
	var usage usageError
	if err := o.parse([]string{"--no-such-flag"}); !errors.As(err, &usage) {
		t.Errorf("an undefined flag: %v, want a usage error", err)
	}
}
