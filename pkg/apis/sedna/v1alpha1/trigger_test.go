package v1alpha1

import "testing"

func TestTriggerConditionHolds(t *testing.T) {
	cases := map[string]struct {
		value     float64
		op        string
		threshold float64
		want      bool
		wantErr   bool
	}{
		"> above":     {value: 6, op: ">", threshold: 5, want: true},
		"> equal":     {value: 5, op: ">", threshold: 5},
		"< below":     {value: 4, op: "<", threshold: 5, want: true},
		"< equal":     {value: 5, op: "<", threshold: 5},
		">= equal":    {value: 5, op: ">=", threshold: 5, want: true},
		">= below":    {value: 4, op: ">=", threshold: 5},
		"<= equal":    {value: 5, op: "<=", threshold: 5, want: true},
		"<= above":    {value: 6, op: "<=", threshold: 5},
		"= equal":     {value: 5, op: "=", threshold: 5, want: true},
		"= fraction":  {value: 5, op: "=", threshold: 5.5},
		"> fraction":  {value: 6, op: ">", threshold: 5.5, want: true},
		"== unknown":  {value: 5, op: "==", threshold: 5, wantErr: true},
		"empty op":    {value: 5, op: "", threshold: 5, wantErr: true},
		"word op":     {value: 5, op: "gt", threshold: 5, wantErr: true},
		"zero vs > 0": {value: 0, op: ">", threshold: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := TriggerCondition{Operator: tc.op, Threshold: tc.threshold}.Holds(tc.value)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("Holds(%v %s %v) = %v, %v; want %v (error: %v)", tc.value, tc.op, tc.threshold, got, err, tc.want, tc.wantErr)
			}
		})
	}
}
