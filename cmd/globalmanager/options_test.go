package main

import (
	"flag"
	"strings"
	"testing"
)

func TestGCPercentDefaultsTo50AndMustBePositive(t *testing.T) {
	parse := func(args ...string) options {
		var o options
		fs := flag.NewFlagSet("globalmanager", flag.ContinueOnError)
		o.addFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return o
	}
	if o := parse(); o.gcPercent != 50 {
		t.Errorf("--gc-percent defaults to %d, want 50", o.gcPercent)
	} else if err := o.validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
	for _, bad := range []string{"0", "-1"} {
		o := parse("--gc-percent=" + bad)
		err := o.validate()
		if err == nil || !strings.Contains(err.Error(), "--gc-percent "+bad) {
			t.Errorf("--gc-percent=%s: error %v, want one naming the flag and its value", bad, err)
		}
	}
}
