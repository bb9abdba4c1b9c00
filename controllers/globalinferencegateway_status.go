package controllers

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/pkg/render"
)

// PickerReport is the global picker's GET /status document (the hub's
// contract): what it sees of each member.
type PickerReport struct {
	Members     []PickerMember `json:"members"`
	GeneratedAt time.Time      `json:"generatedAt"`
}

// PickerMember is one member as the global picker sees it.
type PickerMember struct {
	Name              string  `json:"name"`
	Region            string  `json:"region"`
	Reachable         bool    `json:"reachable"`
	SummaryValid      bool    `json:"summaryValid"`
	InRotation        bool    `json:"inRotation"`
	Reason            string  `json:"reason"`
	SummaryAgeSeconds float64 `json:"summaryAgeSeconds"`
	RTTSeconds        float64 `json:"rttSeconds"`
	LastError         string  `json:"lastError"`
}

// PickerStatusReader reads a global picker's report through its Service.
type PickerStatusReader interface {
	Read(ctx context.Context, namespace, service string) (*PickerReport, error)
}

// maxPickerReport bounds the document read: 32 members' entries are a few KiB.
const maxPickerReport = 1 << 20

// HTTPPickerStatus reads GET /status on the picker Service's metrics port,
// by its cluster DNS name (the operator runs in the cluster).
type HTTPPickerStatus struct {
	Client *http.Client
	// URL, when set, replaces the Service's URL (tests and out-of-cluster runs).
	URL func(namespace, service string) string
}

// Read implements PickerStatusReader.
func (h HTTPPickerStatus) Read(ctx context.Context, namespace, service string) (*PickerReport, error) {
	u := "http://" + render.ServiceHost(service, namespace) + ":" + strconv.Itoa(render.GlobalMetricsPort) + render.GlobalStatusPath
	if h.URL != nil {
		u = h.URL(namespace, service)
	}
	c := h.Client
	if c == nil {
		c = &http.Client{Timeout: pickerStatusTimeout}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPickerReport))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	var r PickerReport
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("GET %s: not the picker's status document: %w", u, err)
	}
	if r.GeneratedAt.IsZero() {
		return nil, fmt.Errorf("GET %s: the status document has no generatedAt", u)
	}
	return &r, nil
}

// pickerStatusTimeout bounds one GET /status: a picker slower than this is
// reported as unreadable rather than holding up the reconcile.
const pickerStatusTimeout = 2 * time.Second

// globalObservation is what one reconcile of a GlobalInferenceGateway found
// and did: the input of globalStatus. A reconcile that fails leaves the later
// fields unset.
type globalObservation struct {
	// Rendered: the children were rendered; Invalid, why they could not be.
	Rendered bool
	Invalid  string
	// Refs are the problems met resolving references and applying children;
	// RefsDone, that every child was applied or found in the way.
	Refs     refProblems
	RefsDone bool
	// MissingSecrets are, by member name, the Secrets it names that do not exist.
	MissingSecrets map[string][]string
	// PickerChecked: the picker Deployment was looked up; Picker is nil when it does not exist.
	PickerChecked bool
	Picker        *appsv1.Deployment
	// Report is the picker's status; ReportErr says why it could not be read
	// (both nil: not asked, since no replica is available).
	Report    *PickerReport
	ReportErr error
}

// Status refresh settings.
const (
	// globalStatusRefresh is how often the picker's report is read again
	// while the picker runs: members change state without any event.
	globalStatusRefresh = 15 * time.Second
	// summaryTimeStep: status.members[].lastSummaryTime moves only by at least
	// this much, so a hub that receives summaries every half second does not
	// rewrite the status on every refresh.
	summaryTimeStep = time.Minute
	// roundTripTolerance: a round trip within this share of the one shown is not rewritten.
	roundTripTolerance = 0.1
)

// globalStatus is a GlobalInferenceGateway's status after a reconcile that
// observed o and ended with err. What the reconcile did not get to observe
// keeps its previous condition, and Ready says why it is Unknown.
func globalStatus(gig *igwv1.GlobalInferenceGateway, o globalObservation, err error) (st igwv1.GlobalInferenceGatewayStatus) {
	st = *gig.Status.DeepCopy()
	st.ObservedGeneration = gig.Generation
	conds := newConditions(st.Conditions, gig.Generation)
	defer func() { st.Conditions = conds.list }()
	st.MemberCount = int32(len(gig.Spec.Members))
	switch {
	case o.Rendered:
		conds.set(igwv1.ConditionAccepted, true, igwv1.ReasonAccepted, "the spec is valid")
	case o.Invalid != "":
		conds.set(igwv1.ConditionAccepted, false, igwv1.ReasonInvalidSpec, "%s", o.Invalid)
	}
	pickerUp := o.PickerChecked && o.Picker != nil && o.Picker.Status.AvailableReplicas > 0
	if o.PickerChecked {
		st.Members, st.MembersInRotation = memberStatuses(gig, st.Members, o, pickerUp)
	}
	name := render.NamesForGlobal(gig).Picker
	switch {
	case !o.Refs.ok():
		conds.set(igwv1.ConditionReady, false, o.Refs.reason(), "%s", o.Refs.message())
	case err != nil:
		conds.setUnknown(igwv1.ConditionReady, igwv1.ReasonReconcileError, "%v (retrying)", err)
	case !o.PickerChecked:
		conds.setUnknown(igwv1.ConditionReady, igwv1.ReasonReconcileError, "the global picker was not looked at (retrying)")
	case o.Picker == nil:
		conds.set(igwv1.ConditionReady, false, igwv1.ReasonEndpointPickerUnavailable, "the global picker Deployment %s/%s does not exist yet", gig.Spec.Namespace, name)
	case !pickerUp:
		conds.set(igwv1.ConditionReady, false, igwv1.ReasonEndpointPickerUnavailable,
			"the global picker Deployment %s/%s has no available replica: check its Pods and events", gig.Spec.Namespace, name)
	case o.Report == nil:
		conds.setUnknown(igwv1.ConditionReady, igwv1.ReasonPickerStatusUnreadable, "the global picker's status cannot be read (retrying): %v", o.ReportErr)
	case st.MembersInRotation == 0:
		conds.set(igwv1.ConditionReady, false, igwv1.ReasonNoMemberInRotation,
			"no member is in rotation, so requests get 503: see status.members[].conditions")
	default:
		conds.set(igwv1.ConditionReady, true, igwv1.ReasonReady, "%d of %d members in rotation", st.MembersInRotation, st.MemberCount)
	}
	return st
}

// memberStatuses are the spec's members, in its order, with conditions from
// the picker's report (Unknown without one, saying why) and a Reachable that
// names a missing Secret first.
func memberStatuses(gig *igwv1.GlobalInferenceGateway, prev []igwv1.GlobalMemberStatus, o globalObservation, pickerUp bool) ([]igwv1.GlobalMemberStatus, int32) {
	reported := map[string]PickerMember{}
	if o.Report != nil && pickerUp {
		for _, m := range o.Report.Members {
			reported[m.Name] = m
		}
	}
	before := map[string]igwv1.GlobalMemberStatus{}
	for _, p := range prev {
		before[p.Name] = p
	}
	var inRotation int32
	out := make([]igwv1.GlobalMemberStatus, 0, len(gig.Spec.Members))
	for _, member := range gig.Spec.Members {
		p := before[member.Name]
		ms := igwv1.GlobalMemberStatus{Name: member.Name, Region: string(member.Region), LastSummaryTime: p.LastSummaryTime, RoundTrip: p.RoundTrip}
		conds := newConditions(p.Conditions, gig.Generation)
		unknown := func(reason, format string, args ...any) {
			for _, t := range []string{igwv1.ConditionReachable, igwv1.ConditionSummaryValid, igwv1.ConditionInRotation} {
				conds.setUnknown(t, reason, format, args...)
			}
		}
		r, ok := reported[member.Name]
		switch {
		case !pickerUp:
			unknown(igwv1.ReasonEndpointPickerUnavailable, "the global picker has no available replica to report on the member")
		case o.Report == nil:
			unknown(igwv1.ReasonPickerStatusUnreadable, "the global picker's status cannot be read: %v", o.ReportErr)
		case !ok:
			unknown(igwv1.ReasonMemberNotReported, "the global picker does not report this member yet (its configuration reloads within seconds of a change)")
		default:
			conds.set(igwv1.ConditionReachable, r.Reachable, pick(r.Reachable, igwv1.ReasonSummaryFetched, igwv1.ReasonUnreachable),
				"%s", pick(r.Reachable, "the last summary fetch was answered", "the summary cannot be fetched: "+cmp.Or(r.LastError, r.Reason)))
			conds.set(igwv1.ConditionSummaryValid, r.SummaryValid, pick(r.SummaryValid, igwv1.ReasonSummaryValid, igwv1.ReasonInvalidSummary),
				"%s", pick(r.SummaryValid, "the last summary is valid", "no valid summary: "+cmp.Or(r.LastError, r.Reason)))
			conds.set(igwv1.ConditionInRotation, r.InRotation, pick(r.InRotation, igwv1.ReasonInRotation, igwv1.ReasonOutOfRotation),
				"%s", cmp.Or(r.Reason, pick(r.InRotation, "the member takes requests", "the member takes no requests")))
			if r.InRotation {
				inRotation++
			}
			if r.SummaryValid {
				ms.LastSummaryTime = steppedTime(ms.LastSummaryTime, o.Report.GeneratedAt.Add(-seconds(r.SummaryAgeSeconds)))
			}
			if r.RTTSeconds > 0 {
				ms.RoundTrip = toleratedRoundTrip(ms.RoundTrip, seconds(r.RTTSeconds))
			}
		}
		if missing := o.MissingSecrets[member.Name]; len(missing) > 0 {
			conds.set(igwv1.ConditionReachable, false, igwv1.ReasonSecretNotFound, "%s", strings.Join(missing, "; "))
		}
		ms.Conditions = conds.list
		out = append(out, ms)
	}
	return out, inRotation
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// steppedTime is at, unless prev is within summaryTimeStep of it.
func steppedTime(prev *metav1.Time, at time.Time) *metav1.Time {
	if prev != nil && at.Sub(prev.Time).Abs() < summaryTimeStep {
		return prev
	}
	t := metav1.NewTime(at.Truncate(time.Second))
	return &t
}

// toleratedRoundTrip is rtt in milliseconds, unless prev is within roundTripTolerance of it.
func toleratedRoundTrip(prev *metav1.Duration, rtt time.Duration) *metav1.Duration {
	if prev != nil && float64((rtt-prev.Duration).Abs()) <= roundTripTolerance*float64(prev.Duration) {
		return prev
	}
	return &metav1.Duration{Duration: rtt.Round(time.Millisecond)}
}

func pick[T any](cond bool, yes, no T) T {
	if cond {
		return yes
	}
	return no
}
