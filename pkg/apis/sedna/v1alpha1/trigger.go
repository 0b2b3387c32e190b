package v1alpha1

import "fmt"

// Holds says whether value <operator> threshold holds. An operator outside
// the API's enumeration (> < >= <= =) is an error. The LocalController's train
// trigger and the GlobalManager's deploy trigger both compare through it, so
// the two ends agree on what a condition means.
func (c TriggerCondition) Holds(value float64) (bool, error) {
	switch c.Operator {
	case ">":
		return value > c.Threshold, nil
	case "<":
		return value < c.Threshold, nil
	case ">=":
		return value >= c.Threshold, nil
	case "<=":
		return value <= c.Threshold, nil
	case "=":
		return value == c.Threshold, nil
	}
	return false, fmt.Errorf("unknown operator %q: want one of > < >= <= =", c.Operator)
}
