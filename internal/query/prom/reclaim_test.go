package prom

import "testing"

func TestReclaimLabelsOnlyWhereSluiceSetsNone(t *testing.T) {
	mk := func() []attrLabel {
		var kv []attrLabel
		for _, k := range []string{"job", "instance", "service_name", "le", "quantile", "job.x"} {
			kv = append(kv, attrLabel{Label: LabelName(k), Key: k, Value: "v"})
		}
		return kv
	}
	labelsOf := func(kv []attrLabel) map[string]string {
		m := map[string]string{}
		for _, k := range kv {
			m[k.Key] = k.Label
		}
		return m
	}
	// Remote write: no resource, a gauge. Every label comes back as sent,
	// except a key that never was a bare label name.
	kv := mk()
	reclaimLabels(kv, false, false, kindGauge)
	want := map[string]string{"job": "job", "instance": "instance", "service_name": "service_name", "le": "le", "quantile": "quantile", "job.x": "job_x"}
	if got := labelsOf(kv); len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for k, w := range want {
		if got := labelsOf(kv)[k]; got != w {
			t.Errorf("%s -> %s, want %s", k, got, w)
		}
	}
	// OTLP with service.name and service.instance.id on a histogram: the
	// labels sluice sets win and the attributes stay exported_.
	kv = mk()
	reclaimLabels(kv, true, true, kindHistogram)
	for _, k := range []string{"job", "instance", "service_name", "le"} {
		if got := labelsOf(kv)[k]; got != "exported_"+k {
			t.Errorf("%s -> %s, want exported_%s", k, got, k)
		}
	}
	if got := labelsOf(kv)["quantile"]; got != "quantile" {
		t.Errorf("quantile on a histogram -> %s", got)
	}
}
