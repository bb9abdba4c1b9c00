package controllers

import "testing"

func TestContains(t *testing.T) {
	live := map[string]any{
		"spec": map[string]any{
			"replicas": int64(2),
			"template": map[string]any{"labels": map[string]any{"a": "1", "added-by-someone": "x"}},
			"ports":    []any{map[string]any{"port": int64(80), "protocol": "TCP"}},
			"weight":   float64(1),
		},
	}
	for name, tc := range map[string]struct {
		want any
		ok   bool
	}{
		"subset":                       {map[string]any{"spec": map[string]any{"replicas": int64(2)}}, true},
		"extra live keys are fine":     {map[string]any{"spec": map[string]any{"template": map[string]any{"labels": map[string]any{"a": "1"}}}}, true},
		"changed scalar":               {map[string]any{"spec": map[string]any{"replicas": int64(3)}}, false},
		"missing key":                  {map[string]any{"spec": map[string]any{"paused": true}}, false},
		"empty map matches absence":    {map[string]any{"spec": map[string]any{"strategy": map[string]any{}}}, true},
		"list element defaulted field": {map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"port": int64(80)}}}}, true},
		"list length differs":          {map[string]any{"spec": map[string]any{"ports": []any{}}}, false},
		"int against float":            {map[string]any{"spec": map[string]any{"weight": int64(1)}}, true},
		"type differs":                 {map[string]any{"spec": map[string]any{"replicas": "2"}}, false},
	} {
		if got := contains(tc.want, live); got != tc.ok {
			t.Errorf("%s: contains = %v, want %v", name, got, tc.ok)
		}
	}
}
