package cycle

import (
	"strings"
	"testing"
	"time"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
)

func TestInWindow(t *testing.T) {
	at := func(hh, mm, ss int) time.Time { return time.Date(2025, 3, 1, hh, mm, ss, 0, time.Local) }
	cases := map[string]struct {
		timer   *sednav1.Timer
		now     time.Time
		want    bool
		wantErr string
	}{
		"no timer":                     {now: at(3, 0, 0), want: true},
		"inside":                       {timer: &sednav1.Timer{Start: "08:00", End: "18:00"}, now: at(12, 0, 0), want: true},
		"at the start":                 {timer: &sednav1.Timer{Start: "08:00", End: "18:00"}, now: at(8, 0, 0), want: true},
		"just before the end":          {timer: &sednav1.Timer{Start: "08:00", End: "18:00"}, now: at(17, 59, 59), want: true},
		"at the end":                   {timer: &sednav1.Timer{Start: "08:00", End: "18:00"}, now: at(18, 0, 0)},
		"before":                       {timer: &sednav1.Timer{Start: "08:00", End: "18:00"}, now: at(7, 59, 59)},
		"after":                        {timer: &sednav1.Timer{Start: "08:00", End: "18:00"}, now: at(23, 0, 0)},
		"wrapping, late":               {timer: &sednav1.Timer{Start: "22:00", End: "06:00"}, now: at(23, 30, 0), want: true},
		"wrapping, early":              {timer: &sednav1.Timer{Start: "22:00", End: "06:00"}, now: at(5, 59, 0), want: true},
		"wrapping, at midnight":        {timer: &sednav1.Timer{Start: "22:00", End: "06:00"}, now: at(0, 0, 0), want: true},
		"wrapping, in the day":         {timer: &sednav1.Timer{Start: "22:00", End: "06:00"}, now: at(12, 0, 0)},
		"wrapping, at the end":         {timer: &sednav1.Timer{Start: "22:00", End: "06:00"}, now: at(6, 0, 0)},
		"to 24:00, last minute":        {timer: &sednav1.Timer{Start: "20:00", End: "24:00"}, now: at(23, 59, 59), want: true},
		"to 24:00, before":             {timer: &sednav1.Timer{Start: "20:00", End: "24:00"}, now: at(19, 0, 0)},
		"the whole day":                {timer: &sednav1.Timer{Start: "00:00", End: "24:00"}, now: at(0, 0, 0), want: true},
		"an empty window":              {timer: &sednav1.Timer{Start: "10:00", End: "10:00"}, now: at(10, 0, 0)},
		"another zone is read locally": {timer: &sednav1.Timer{Start: "08:00", End: "18:00"}, now: at(12, 0, 0).In(time.FixedZone("X", 11*3600)), want: true},
		"bad start":                    {timer: &sednav1.Timer{Start: "8:00", End: "18:00"}, now: at(12, 0, 0), wantErr: `timer start: "8:00" is not HH:MM`},
		"bad end":                      {timer: &sednav1.Timer{Start: "08:00", End: "24:30"}, now: at(12, 0, 0), wantErr: `timer end: "24:30" is not HH:MM`},
		"minutes past 59":              {timer: &sednav1.Timer{Start: "08:60", End: "18:00"}, now: at(12, 0, 0), wantErr: "not HH:MM"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := inWindow(tc.timer, tc.now)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("inWindow = %v, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("inWindow = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestSplitIsDeterministicAndSizedByTrainProb(t *testing.T) {
	samples := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	cases := map[string]struct {
		prob      float64
		wantTrain int
	}{
		"0.8":          {prob: 0.8, wantTrain: 8},
		"0.75 rounds":  {prob: 0.75, wantTrain: 8},
		"0.74 rounds":  {prob: 0.74, wantTrain: 7},
		"all to train": {prob: 1, wantTrain: 10},
		"all to test":  {prob: 0, wantTrain: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			train, test := split(samples, tc.prob, 3)
			if len(train) != tc.wantTrain || len(test) != len(samples)-tc.wantTrain {
				t.Errorf("split into %d+%d, want %d+%d", len(train), len(test), tc.wantTrain, len(samples)-tc.wantTrain)
			}
			again, _ := split(samples, tc.prob, 3)
			if strings.Join(train, ",") != strings.Join(again, ",") {
				t.Errorf("the same round split differently: %v then %v", train, again)
			}
			all := append(append([]string(nil), train...), test...)
			if len(all) != len(samples) || !sameSet(all, samples) {
				t.Errorf("train+test = %v, want the samples %v", all, samples)
			}
		})
	}
	if samples[0] != "a" {
		t.Error("split changed its input")
	}
}

func sameSet(a, b []string) bool {
	count := make(map[string]int)
	for _, s := range a {
		count[s]++
	}
	for _, s := range b {
		count[s]--
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
}
