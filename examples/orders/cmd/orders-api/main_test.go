package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPostOrder_BadInput: an order that is not one is answered 400 with
// the reason, before anything reaches the broker or the database.
func TestPostOrder_BadInput(t *testing.T) {
	a := &api{} // NB: no producer, no database: nothing may get that far
	for _, body := range []string{
		``, `{`, `[]`, `{"customer": "c", "items": 1}`, `{"customer": "", "items": 1, "amount": 5}`,
		`{"customer": "c", "items": 0, "amount": 5}`, `{"customer": "c", "items": 1, "amount": -5}`,
		`{"customer": "c", "items": 1, "amount": 5, "id": "mine"}`, `{"customer": "c", "items": 1, "amount": 5, "x": 1}`,
		`{"customer": "` + strings.Repeat("c", 129) + `", "items": 1, "amount": 5}`,
		`{"customer": "` + strings.Repeat("c", 70<<10) + `", "items": 1, "amount": 5}`,
	} {
		w := httptest.NewRecorder()
		a.postOrder(w, httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(body)))
		if w.Code != http.StatusBadRequest || !strings.HasPrefix(w.Body.String(), "bad order") {
			t.Errorf("%.60q: %d %q, want 400 bad order", body, w.Code, w.Body.String())
		}
	}
}
