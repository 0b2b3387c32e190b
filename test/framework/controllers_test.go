package framework

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestQuietWatchSettlesOnlyOnceASyncAfterTheReadingIsFollowedByQuiet(t *testing.T) {
	since := ControllerReading{start: 1, syncs: 5, adds: 5, taken: 5, finished: 5}
	synced := ControllerReading{start: 1, syncs: 6, adds: 6, taken: 6, finished: 6}
	syncing := ControllerReading{start: 1, syncs: 5, adds: 6, taken: 6, finished: 5}
	queued := ControllerReading{start: 1, syncs: 6, adds: 7, taken: 6, finished: 6, depth: 1}
	delayed := synced
	delayed.delayed = 1
	restarted := ControllerReading{start: 2, syncs: 1, adds: 1, taken: 1, finished: 1}
	type read struct {
		r  ControllerReading
		at time.Duration
	}
	for name, tc := range map[string]struct {
		reads []read
		want  []bool
	}{
		"nothing taken after the reading": {
			reads: []read{{since, 0}, {since, 300 * time.Millisecond}, {since, time.Second}},
			want:  []bool{false, false, false},
		},
		"a sync, then quiet": {
			reads: []read{{synced, 0}, {synced, 100 * time.Millisecond}, {synced, 250 * time.Millisecond}},
			want:  []bool{false, false, true},
		},
		"a sync under way starts the quiet period again": {
			reads: []read{{synced, 0}, {syncing, 200 * time.Millisecond}, {synced, 300 * time.Millisecond},
				{synced, 500 * time.Millisecond}, {synced, 550 * time.Millisecond}},
			want: []bool{false, false, false, false, true},
		},
		"a queued key is not quiet": {
			reads: []read{{queued, 0}, {queued, time.Second}},
			want:  []bool{false, false},
		},
		"a delayed add starts the quiet period again": {
			reads: []read{{synced, 0}, {delayed, 200 * time.Millisecond}, {delayed, 400 * time.Millisecond},
				{delayed, 450 * time.Millisecond}},
			want: []bool{false, false, false, true},
		},
		"a restarted process counts from zero": {
			reads: []read{{restarted, 0}, {restarted, 250 * time.Millisecond}},
			want:  []bool{false, true},
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := &quietWatch{since: since, quiet: quietPeriod}
			t0 := time.Now()
			var got []bool
			for _, r := range tc.reads {
				got = append(got, w.settled(r.r, t0.Add(r.at)))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("settled after each reading (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestFlagDurationReadsTheLastValueGiven(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want time.Duration
	}{
		"none":              {args: []string{"--namespace", "x"}, want: 0},
		"separate value":    {args: []string{"--child-event-batch-period", "2s"}, want: 2 * time.Second},
		"with =":            {args: []string{"--child-event-batch-period=500ms"}, want: 500 * time.Millisecond},
		"the last one wins": {args: []string{"--child-event-batch-period=1s", "--child-event-batch-period", "3s"}, want: 3 * time.Second},
		"another flag":      {args: []string{"--child-event-batch-period-x=1s"}, want: 0},
	} {
		t.Run(name, func(t *testing.T) {
			p := NewProcess("globalmanager", "", "", tc.args...)
			if got := p.flagDuration("child-event-batch-period"); got != tc.want {
				t.Errorf("flagDuration = %s, want %s", got, tc.want)
			}
		})
	}
}
