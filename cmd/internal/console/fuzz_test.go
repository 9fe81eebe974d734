package console

import (
	"bytes"
	"net/http/httptest"
	"net/url"
	"testing"
)

// FuzzParseSearch: any query string parses to a search or a 400, never a
// panic; an accepted search holds what its kind needs, within bounds.
func FuzzParseSearch(f *testing.F) {
	for _, s := range []string{"msgId=7F00000100002A9F0000000000000000", "topic=t&msgId=abc", "topic=t&key=k&max=5",
		"topic=t&broker=b&queue=1&offset=2", "topic=t&begin=2026-12-01T17:00&end=1764608400000", "topic=t&begin=-1",
		"topic=t&queue=99999&offset=0&broker=b", "max=0", "", "topic=t&begin=3&end=2", "%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		s, err := parseSearch(q)
		if err != nil {
			if statusOf(err) != 400 {
				t.Fatalf("%q: status %d for %v", raw, statusOf(err), err)
			}
			return
		}
		if s.max < 1 || s.max > maxResults {
			t.Fatalf("%q: max %d", raw, s.max)
		}
		switch s.kind {
		case byID:
			if s.id == "" {
				t.Fatalf("%q: byID without an id", raw)
			}
		case byKey:
			if s.topic == "" || s.key == "" {
				t.Fatalf("%q: byKey without topic or key", raw)
			}
		case byOffset:
			if s.topic == "" || s.broker == "" || s.queue < 0 || s.queue > 65535 || s.offset < 0 {
				t.Fatalf("%q: bad byOffset %+v", raw, s)
			}
		case byTime:
			if s.topic == "" || s.begin.IsZero() || !s.end.IsZero() && s.end.Before(s.begin) {
				t.Fatalf("%q: bad byTime %+v", raw, s)
			}
		default:
			t.Fatalf("%q: kind %d", raw, s.kind)
		}
	})
}

// FuzzForms: any request body decodes to the forms of the write requests
// or is a 400 that says so; a topic form that passes check has bounded
// queues and a known perm.
func FuzzForms(f *testing.F) {
	for _, s := range []string{`{"topic":"t","readQueues":4,"writeQueues":4,"perm":6}`, `{"topic":"t","time":"0"}`,
		`{"msgId":"x"}`, `[]`, `{"readQueues":1e9}`, `"x"`, `{"topic":1}`, ``, `{"perm":-2,"topic":"a"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var tf topicForm
		if err := decodeJSON(httptest.NewRequest("POST", "/api/topics", bytes.NewReader(body)), &tf); err != nil {
			if statusOf(err) != 400 {
				t.Fatalf("%q: status %d", body, statusOf(err))
			}
		} else if tf.check() == nil {
			if tf.Topic == "" || tf.ReadQueues < 0 || tf.ReadQueues > 1024 || tf.WriteQueues < 0 || tf.WriteQueues > 1024 ||
				tf.Perm != 0 && tf.Perm != 2 && tf.Perm != 4 && tf.Perm != 6 {
				t.Fatalf("%q: accepted %+v", body, tf)
			}
		}
		var rf resetForm
		if err := decodeJSON(httptest.NewRequest("POST", "/", bytes.NewReader(body)), &rf); err == nil && rf.Time != "" {
			if _, err := parseTime("time", string(rf.Time)); err != nil && statusOf(err) != 400 {
				t.Fatalf("%q: status %d", rf.Time, statusOf(err))
			}
		}
	})
}
