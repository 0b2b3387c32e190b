package learningcycle

import (
	"encoding/json"
	"testing"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
)

func raws(objs ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(objs))
	for i, o := range objs {
		out[i] = json.RawMessage(o)
	}
	return out
}

func TestEvaluateConditionFiresOnlyWhenEveryValueSatisfiesIt(t *testing.T) {
	cond := func(metric, op string, threshold float64) sednav1.TriggerCondition {
		return sednav1.TriggerCondition{Metric: metric, Operator: op, Threshold: threshold}
	}
	cases := map[string]struct {
		cond         sednav1.TriggerCondition
		results      []json.RawMessage
		wantFire     bool
		wantSentence string
	}{
		"scalar above": {
			cond: cond("precision_delta", ">", 0.1), results: raws(`{"metrics":{"precision_delta":0.15}}`),
			wantFire: true, wantSentence: "precision_delta 0.15 > 0.1: deploying",
		},
		"scalar equal is not above": {
			cond: cond("precision_delta", ">", 0.1), results: raws(`{"metrics":{"precision_delta":0.1}}`),
			wantSentence: "precision_delta 0.1 is not > 0.1: not deploying",
		},
		"scalar as a numeric string": {
			cond: cond("accuracy", ">=", 0.9), results: raws(`{"metrics":{"accuracy":"0.9"}}`),
			wantFire: true, wantSentence: "accuracy 0.9 >= 0.9: deploying",
		},
		"less than": {
			cond: cond("loss", "<", 0.5), results: raws(`{"metrics":{"loss":0.4}}`),
			wantFire: true, wantSentence: "loss 0.4 < 0.5: deploying",
		},
		"less than or equal fails": {
			cond: cond("loss", "<=", 0.5), results: raws(`{"metrics":{"loss":0.6}}`),
			wantSentence: "loss 0.6 is not <= 0.5: not deploying",
		},
		"equal": {
			cond: cond("count", "=", 500), results: raws(`{"metrics":{"count":500}}`),
			wantFire: true, wantSentence: "count 500 = 500: deploying",
		},
		"list: every element above": {
			cond: cond("precision_delta", ">", 0.1), results: raws(`{"metrics":{"precision_delta":[0.15,0.2]}}`),
			wantFire: true, wantSentence: "precision_delta [0.15,0.2] > 0.1 for every element: deploying",
		},
		"list: one element below": {
			cond: cond("precision_delta", ">", 0.1), results: raws(`{"metrics":{"precision_delta":[0.15,-0.02]}}`),
			wantSentence: "precision_delta [0.15,-0.02] is not > 0.1 for element 1: not deploying",
		},
		"list as text, as status metrics keep it": {
			cond: cond("precision_delta", ">", 0.1), results: raws(`{"metrics":{"precision_delta":"[0.15, \"0.2\"]"}}`),
			wantFire: true, wantSentence: "precision_delta [0.15,0.2] > 0.1 for every element: deploying",
		},
		"empty list": {
			cond: cond("precision_delta", ">", 0.1), results: raws(`{"metrics":{"precision_delta":[]}}`),
			wantSentence: "precision_delta is an empty list: not deploying",
		},
		"derived scalar delta": {
			cond: cond("precision_delta", ">", 0.1), results: raws(`{"metrics":{"precision":0.95}}`, `{"metrics":{"precision":0.8}}`),
			wantFire: true, wantSentence: "precision_delta 0.15 > 0.1: deploying",
		},
		"derived delta rounds float noise": {
			cond: cond("precision_delta", ">=", 0.1), results: raws(`{"metrics":{"precision":0.3}}`, `{"metrics":{"precision":0.2}}`),
			wantFire: true, wantSentence: "precision_delta 0.1 >= 0.1: deploying",
		},
		"derived list delta, per class": {
			cond: cond("precision_delta", ">", 0.1), results: raws(`{"metrics":{"precision":[0.9,0.7]}}`, `{"metrics":{"precision":[0.7,0.72]}}`),
			wantSentence: "precision_delta [0.2,-0.02] is not > 0.1 for element 1: not deploying",
		},
		"derived delta of lists of different lengths": {
			cond: cond("precision_delta", ">", 0.1), results: raws(`{"metrics":{"precision":[0.9,0.7]}}`, `{"metrics":{"precision":[0.7]}}`),
			wantSentence: "precision of the new model [0.9,0.7] and of the deployed one [0.7] cannot be subtracted: not deploying",
		},
		"derived delta without the deployed model's result": {
			cond: cond("precision_delta", ">", 0.1), results: raws(`{"metrics":{"precision":0.9}}`),
			wantSentence: "precision_delta is not in the evaluation results, nor is precision of both the new and the deployed model: not deploying",
		},
		"missing metric": {
			cond: cond("recall", ">", 0.1), results: raws(`{"metrics":{"precision":0.9}}`),
			wantSentence: "recall is not in the evaluation results: not deploying",
		},
		"no results": {
			cond:         cond("recall", ">", 0.1),
			wantSentence: "recall is not in the evaluation results: not deploying",
		},
		"not a number": {
			cond: cond("precision", ">", 0.1), results: raws(`{"metrics":{"precision":"high"}}`),
			wantSentence: `precision "high" is not a number or a list of numbers: not deploying`,
		},
		"unknown operator": {
			cond: cond("precision", "!=", 0.1), results: raws(`{"metrics":{"precision":0.9}}`),
			wantSentence: `operator "!=" is not one of >, <, >=, <=, =: not deploying`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fire, sentence := EvaluateCondition(tc.cond, tc.results)
			if fire != tc.wantFire || sentence != tc.wantSentence {
				t.Errorf("EvaluateCondition = %v, %q; want %v, %q", fire, sentence, tc.wantFire, tc.wantSentence)
			}
		})
	}
}
