package conversion

import (
	"encoding/json"
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
)

// rounds is how many random objects each round trip converts.
const rounds = 100

// newFiller fills objects as apimachinery's round-trip tests do: its
// metadata fuzzer functions (times to the second, quantities, raw
// extensions that parse), profilings that are JSON objects, and v1
// statuses as the v1 schema has them: phases, and condition types of v1's
// phases, EdgeLinked, Scheduled, ReplicasCreated and Suspended, replicaStatus keyed by v1's replica types (V1StatusToV2's
// domain).
func newFiller(t *testing.T, seed int64) *randfill.Filler {
	t.Helper()
	scheme := runtime.NewScheme()
	codecs := serializer.NewCodecFactory(scheme)
	ours := func(serializer.CodecFactory) []any {
		return []any{
			func(r *runtime.RawExtension, c randfill.Continue) {
				raw, _ := json.Marshal(map[string]string{c.String(8): c.String(16)})
				r.Raw = raw
			},
			fillV1Status,
		}
	}
	return fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, ours), rand.NewSource(seed), codecs).NilChance(0.2).NumElements(0, 2)
}

// v1Phases are the phases a v1 status may hold.
var v1Phases = []div1.Phase{"", div1.JobCreated, div1.JobRunning, div1.JobSucceeded, div1.JobFailed, div1.JobUnknown}

// v1ConditionTypes are the types a v1 condition may have.
var v1ConditionTypes = append(v1Phases[1:len(v1Phases):len(v1Phases)], div1.ConditionEdgeLinked, div1.ConditionScheduled, div1.ConditionReplicasCreated, div1.ConditionSuspended)

// fillV1Status fills a v1 status with v1's phases, condition types and
// replica types.
func fillV1Status(s *div1.DIJobStatus, c randfill.Continue) {
	s.Phase = v1Phases[c.Intn(len(v1Phases))]
	s.Conditions = nil
	for _, i := range c.Perm(len(v1ConditionTypes))[:c.Intn(3)] {
		cond := div1.DIJobCondition{}
		c.Fill(&cond)
		cond.Type = v1ConditionTypes[i]
		s.Conditions = append(s.Conditions, cond)
	}
	s.ReplicaStatus = nil
	for _, i := range c.Perm(len(replicaTypes))[:c.Intn(len(replicaTypes)+1)] {
		if s.ReplicaStatus == nil {
			s.ReplicaStatus = map[div1.ReplicaType]*div1.ReplicaStatus{}
		}
		r := &div1.ReplicaStatus{}
		c.Fill(r)
		s.ReplicaStatus[replicaTypes[i]] = r
	}
}

// asJSON is what the API server sees of an object.
func asJSON(t *testing.T, obj any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func randomV1(f *randfill.Filler) *div1.DIJob {
	job := &div1.DIJob{}
	f.Fill(job)
	job.APIVersion, job.Kind = div1.SchemeGroupVersion.String(), "DIJob"
	delete(job.Annotations, AnnotationV2) // the conversion's own
	return job
}

func randomV2(f *randfill.Filler) *div2.DIJob {
	job := &div2.DIJob{}
	f.Fill(job)
	job.APIVersion, job.Kind = div2.SchemeGroupVersion.String(), "DIJob"
	delete(job.Annotations, AnnotationV1) // the conversion's own
	return job
}

// TestV1JobReadsBackIdenticalFromV2: a v1 job stored as v2alpha1 reads back
// in v1alpha1 as it was written, and is a v1 job in both.
func TestV1JobReadsBackIdenticalFromV2(t *testing.T) {
	f := newFiller(t, 1)
	for range rounds {
		in := randomV1(f)
		v2, err := ToV2(in.DeepCopy())
		if err != nil {
			t.Fatalf("ToV2: %v", err)
		}
		if !IsV1(v2) {
			t.Fatalf("ToV2 of a v1 job is not marked v1: %v", v2.Annotations)
		}
		back, err := ToV1(v2)
		if err != nil {
			t.Fatalf("ToV1: %v", err)
		}
		if !IsV1InV1alpha1(back) {
			t.Fatalf("a v1 job read back in v1alpha1 is not a v1 job: %v", back.Annotations)
		}
		if diff := cmp.Diff(asJSON(t, in), asJSON(t, back)); diff != "" {
			t.Fatalf("v1 -> v2 -> v1 changed the job (-want,+got):\n%s", diff)
		}
	}
}

// TestV2JobWrittenBackThroughV1IsUnchanged: a v2 job read in v1alpha1 and
// written back is the same v2 job.
func TestV2JobWrittenBackThroughV1IsUnchanged(t *testing.T) {
	f := newFiller(t, 2)
	for range rounds {
		in := randomV2(f)
		back := throughV1(t, in, false)
		if diff := cmp.Diff(asJSON(t, in), asJSON(t, back)); diff != "" {
			t.Fatalf("v2 -> v1 -> v2 changed the job (-want,+got):\n%s", diff)
		}
	}
}

// TestV1JobChangedThroughV2RoundTrips: a v1 job whose v2alpha1 object a v2
// client changed in ways v1alpha1 has no field for (preemptible, more
// tasks, a v2 status) keeps those changes through v1alpha1 and stays a v1
// job.
func TestV1JobChangedThroughV2RoundTrips(t *testing.T) {
	f := newFiller(t, 3)
	for range rounds {
		v2, err := ToV2(randomV1(f))
		if err != nil {
			t.Fatalf("ToV2: %v", err)
		}
		other := randomV2(f)
		v2.Spec.Preemptible, v2.Spec.Replicas, v2.Spec.Priority = other.Spec.Preemptible, other.Spec.Replicas, other.Spec.Priority
		v2.Spec.Tasks = append(v2.Spec.Tasks, other.Spec.Tasks...)
		v2.Status = other.Status
		back := throughV1(t, v2, true)
		if diff := cmp.Diff(asJSON(t, v2), asJSON(t, back)); diff != "" {
			t.Fatalf("v2 -> v1 -> v2 changed the v1 job (-want,+got):\n%s", diff)
		}
	}
}

// throughV1 is job read in v1alpha1 and written back, checking on the way
// that it is a v1 job in both versions, or in neither.
func throughV1(t *testing.T, job *div2.DIJob, v1Job bool) *div2.DIJob {
	t.Helper()
	v1, err := ToV1(job.DeepCopy())
	if err != nil {
		t.Fatalf("ToV1: %v", err)
	}
	if IsV1InV1alpha1(v1) != v1Job {
		t.Fatalf("read in v1alpha1, IsV1InV1alpha1 = %v, want %v: %v", !v1Job, v1Job, v1.Annotations)
	}
	back, err := ToV2(roundTripJSON(t, v1))
	if err != nil {
		t.Fatalf("ToV2: %v", err)
	}
	if IsV1(back) != v1Job {
		t.Fatalf("written back, IsV1 = %v, want %v: %v", !v1Job, v1Job, back.Annotations)
	}
	return back
}

// roundTripJSON is obj as the API server hands it back: encoded and
// decoded.
func roundTripJSON(t *testing.T, obj *div1.DIJob) *div1.DIJob {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	out := &div1.DIJob{}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatal(err)
	}
	return out
}
