package controllers

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
)

func TestGlobalStatus(t *testing.T) {
	gig := &igwv1.GlobalInferenceGateway{ObjectMeta: metav1.ObjectMeta{Name: "fabric", Generation: generation},
		Spec: igwv1.GlobalInferenceGatewaySpec{Namespace: "hub", Members: []igwv1.GlobalMember{
			{Name: "use1", Region: "us-east-1"}, {Name: "euw1", Region: "eu-west-1"}, {Name: "apse1", Region: "ap-southeast-1"}}}}
	at := time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC)
	picker := func(available int32) *appsv1.Deployment {
		return &appsv1.Deployment{Status: appsv1.DeploymentStatus{AvailableReplicas: available}}
	}
	healthy := PickerMember{Name: "use1", Reachable: true, SummaryValid: true, InRotation: true, SummaryAgeSeconds: 0.4, RTTSeconds: 0.012}
	garbage := PickerMember{Name: "euw1", Reachable: true, Reason: "summary rejected", LastError: "models[0].kvHeadroom: 1.7 is above 1"}
	dead := PickerMember{Name: "apse1", Reason: "2 failed probes in a row", LastError: "dial tcp 10.3.0.1:443: connect: connection refused"}
	report := &PickerReport{GeneratedAt: at, Members: []PickerMember{healthy, garbage, dead}}
	refs := func(reason, msg string) refProblems { var p refProblems; p.add(reason, msg); return p }
	statusUnknown := errors.New("connection refused")
	const (
		pickerDown = "Unknown/" + igwv1.ReasonEndpointPickerUnavailable
	)
	type members map[string]map[string]string // member -> condition -> Status/Reason
	all := func(v string) map[string]string {
		return map[string]string{igwv1.ConditionReachable: v, igwv1.ConditionSummaryValid: v, igwv1.ConditionInRotation: v}
	}
	for _, c := range []struct {
		name       string
		o          globalObservation
		err        error
		ready      string
		members    members
		inRotation int32
	}{
		{name: "no InferenceGatewayConfig in the namespace: nothing rendered",
			o:     globalObservation{Refs: refs(igwv1.ReasonConfigNotFound, "no config")},
			ready: "False/" + igwv1.ReasonConfigNotFound},
		{name: "applied, the picker not created yet by the API server's view",
			o:       globalObservation{Rendered: true, RefsDone: true, PickerChecked: true},
			ready:   "False/" + igwv1.ReasonEndpointPickerUnavailable,
			members: members{"use1": all(pickerDown), "euw1": all(pickerDown), "apse1": all(pickerDown)}},
		{name: "a member's Secret missing: Ready and its Reachable say which",
			o: globalObservation{Rendered: true, RefsDone: true, PickerChecked: true, Picker: picker(0),
				Refs:           refs(igwv1.ReasonSecretNotFound, "Secret hub/euw1-token of members[euw1].credentialsSecretRef does not exist"),
				MissingSecrets: map[string][]string{"euw1": {"Secret hub/euw1-token of members[euw1].credentialsSecretRef does not exist"}}},
			ready: "False/" + igwv1.ReasonSecretNotFound,
			members: members{"use1": all(pickerDown), "apse1": all(pickerDown), "euw1": {
				igwv1.ConditionReachable: "False/" + igwv1.ReasonSecretNotFound, igwv1.ConditionSummaryValid: pickerDown, igwv1.ConditionInRotation: pickerDown}}},
		{name: "the picker runs but its status cannot be read",
			o:     globalObservation{Rendered: true, RefsDone: true, PickerChecked: true, Picker: picker(1), ReportErr: statusUnknown},
			ready: "Unknown/" + igwv1.ReasonPickerStatusUnreadable,
			members: members{"use1": all("Unknown/" + igwv1.ReasonPickerStatusUnreadable), "euw1": all("Unknown/" + igwv1.ReasonPickerStatusUnreadable),
				"apse1": all("Unknown/" + igwv1.ReasonPickerStatusUnreadable)}},
		{name: "the picker reports: one in rotation, one sending garbage, one dead, per member",
			o:     globalObservation{Rendered: true, RefsDone: true, PickerChecked: true, Picker: picker(2), Report: report},
			ready: "True/" + igwv1.ReasonReady, inRotation: 1,
			members: members{
				"use1":  {igwv1.ConditionReachable: "True/" + igwv1.ReasonSummaryFetched, igwv1.ConditionSummaryValid: "True/" + igwv1.ReasonSummaryValid, igwv1.ConditionInRotation: "True/" + igwv1.ReasonInRotation},
				"euw1":  {igwv1.ConditionReachable: "True/" + igwv1.ReasonSummaryFetched, igwv1.ConditionSummaryValid: "False/" + igwv1.ReasonInvalidSummary, igwv1.ConditionInRotation: "False/" + igwv1.ReasonOutOfRotation},
				"apse1": {igwv1.ConditionReachable: "False/" + igwv1.ReasonUnreachable, igwv1.ConditionSummaryValid: "False/" + igwv1.ReasonInvalidSummary, igwv1.ConditionInRotation: "False/" + igwv1.ReasonOutOfRotation},
			}},
		{name: "the picker reports no member in rotation; one it does not know yet",
			o: globalObservation{Rendered: true, RefsDone: true, PickerChecked: true, Picker: picker(1),
				Report: &PickerReport{GeneratedAt: at, Members: []PickerMember{garbage, dead}}},
			ready: "False/" + igwv1.ReasonNoMemberInRotation,
			members: members{"use1": all("Unknown/" + igwv1.ReasonMemberNotReported),
				"euw1":  {igwv1.ConditionReachable: "True/" + igwv1.ReasonSummaryFetched, igwv1.ConditionSummaryValid: "False/" + igwv1.ReasonInvalidSummary, igwv1.ConditionInRotation: "False/" + igwv1.ReasonOutOfRotation},
				"apse1": {igwv1.ConditionReachable: "False/" + igwv1.ReasonUnreachable, igwv1.ConditionSummaryValid: "False/" + igwv1.ReasonInvalidSummary, igwv1.ConditionInRotation: "False/" + igwv1.ReasonOutOfRotation}}},
		{name: "a spec one Backend cannot hold: Accepted and Ready False with what to change",
			o:     globalObservation{Invalid: "members a are addressed by IP and b by host name", Refs: refs(igwv1.ReasonInvalidSpec, "members a are addressed by IP and b by host name")},
			ready: "False/" + igwv1.ReasonInvalidSpec},
		{name: "an API error after applying: Ready Unknown", err: errAPIDown,
			o:     globalObservation{Rendered: true, RefsDone: true},
			ready: unknown},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := globalStatus(gig, c.o, c.err)
			wantTop := map[string]string{igwv1.ConditionReady: c.ready}
			switch {
			case c.o.Rendered:
				wantTop[igwv1.ConditionAccepted] = "True/" + igwv1.ReasonAccepted
			case c.o.Invalid != "":
				wantTop[igwv1.ConditionAccepted] = "False/" + igwv1.ReasonInvalidSpec
			}
			checkConditions(t, nil, st.Conditions, wantTop)
			if st.ObservedGeneration != generation || st.MemberCount != 3 || st.MembersInRotation != c.inRotation {
				t.Errorf("observedGeneration %d, memberCount %d, membersInRotation %d; want %d, 3, %d",
					st.ObservedGeneration, st.MemberCount, st.MembersInRotation, generation, c.inRotation)
			}
			if c.members == nil {
				if len(st.Members) != 0 {
					t.Errorf("members %v before the picker was looked at", st.Members)
				}
				return
			}
			if len(st.Members) != 3 || st.Members[0].Name != "use1" || st.Members[2].Name != "apse1" || st.Members[2].Region != "ap-southeast-1" {
				t.Fatalf("members %+v, want the spec's three in its order", st.Members)
			}
			for _, m := range st.Members {
				checkConditions(t, nil, m.Conditions, c.members[m.Name])
			}
		})
	}

	t.Run("the messages carry the picker's reason and error", func(t *testing.T) {
		st := globalStatus(gig, globalObservation{Rendered: true, RefsDone: true, PickerChecked: true, Picker: picker(1), Report: report}, nil)
		euw1 := meta.FindStatusCondition(st.Members[1].Conditions, igwv1.ConditionSummaryValid)
		apse1 := meta.FindStatusCondition(st.Members[2].Conditions, igwv1.ConditionInRotation)
		if !strings.Contains(euw1.Message, "kvHeadroom: 1.7 is above 1") || !strings.Contains(apse1.Message, "2 failed probes in a row") {
			t.Errorf("messages %q, %q", euw1.Message, apse1.Message)
		}
		if got := st.Members[0].RoundTrip; got == nil || got.Duration != 12*time.Millisecond {
			t.Errorf("roundTrip %v, want 12ms", got)
		}
		if got := st.Members[0].LastSummaryTime; got == nil || !got.Time.Equal(at.Add(-time.Second)) {
			t.Errorf("lastSummaryTime %v, want %v (generatedAt - age, to the second)", got, at.Add(-time.Second))
		}
	})

	t.Run("a later report that changes nothing but the summary's age and a little RTT leaves the status equal", func(t *testing.T) {
		first := globalStatus(gig, globalObservation{Rendered: true, RefsDone: true, PickerChecked: true, Picker: picker(1), Report: report}, nil)
		again := gig.DeepCopy()
		again.Status = first
		later := *report
		later.GeneratedAt = at.Add(15 * time.Second)
		later.Members = []PickerMember{healthy, garbage, dead}
		later.Members[0].RTTSeconds = 0.0125
		second := globalStatus(again, globalObservation{Rendered: true, RefsDone: true, PickerChecked: true, Picker: picker(1), Report: &later}, nil)
		if !equality.Semantic.DeepEqual(first, second) {
			t.Errorf("status changed:\n%+v\n%+v", first.Members[0], second.Members[0])
		}
	})
}

func TestHTTPPickerStatusReadsTheContractDocument(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/status":
			_, _ = w.Write([]byte(`{"members":[{"name":"use1","region":"us-east-1","reachable":true,"summaryValid":true,"inRotation":true,"reason":"","summaryAgeSeconds":0.3,"rttSeconds":0.01,"lastError":""}],"generatedAt":"2026-12-03T15:00:00Z"}`))
		case "/garbage/status":
			_, _ = w.Write([]byte(`<html>not json</html>`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	read := func(prefix string) (*PickerReport, error) {
		return HTTPPickerStatus{URL: func(ns, svc string) string { return srv.URL + prefix + "/status" }}.Read(context.Background(), "hub", "fabric-global-picker")
	}
	r, err := read("")
	if err != nil || len(r.Members) != 1 || !r.Members[0].InRotation || r.Members[0].RTTSeconds != 0.01 || r.GeneratedAt.IsZero() {
		t.Fatalf("report %+v, %v", r, err)
	}
	for _, prefix := range []string{"/garbage", "/missing"} {
		if _, err := read(prefix); err == nil {
			t.Errorf("%s: no error", prefix)
		}
	}
}
