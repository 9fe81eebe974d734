package store

import (
	"slices"

	"github.com/sluicemq/sluice/internal/message"
)

// The put path's side of the duplicate window.
//
// A Dedup request's keys are hashed in prepare, outside putMu. Under
// putMu, before any append, dedupCheck looks each key up: a key the window
// holds is answered with the entry's ids and not appended; any other key
// gets a pending entry at once, so a later request of the same Submit, or
// of a Submit waiting for putMu, finds it. After the appends, still under
// putMu, dedupRecord fills the pending entries with the stored ids (or
// removes them when the append failed) and answers the requests that
// repeated one of the same Submit. NB: putMu orders the two concurrent
// sends of one key: the first inserts before the second looks.

// dedupKind says how a request (or a batch member) meets the window.
type dedupKind uint8

const (
	ddNone    dedupKind = iota // no key, or not deduplicated
	ddKey                      // has a key, not yet looked up
	ddPending                  // looked up, absent: stored, entry seq pending
	ddWindow                   // a duplicate of a stored message (entry e)
	ddRequest                  // a duplicate of member member of request req of this Submit
)

// dedupState is a request's (or a batch member's) meeting with the window.
type dedupState struct {
	kind        dedupKind
	key         dedupKey
	topic, raw  string     // the key as sent, while the window is rebuilt (storedDup)
	seq         uint64     // ddPending
	e           dedupEntry // ddWindow
	req, member int        // ddRequest
}

// dedupPrepare hashes the keys of a Dedup request. REQUIRES: s.dedup set.
func (s *Store) dedupPrepare(r *PutRequest, sz *sized) {
	if r.Msg != nil {
		m := r.Msg
		if message.TxType(m.SysFlag) != message.TxNot || !dedupTopic(m.Topic) {
			return
		}
		if k, ok := message.PropertyValue(m.Properties, message.PropUniqKey); ok && k != "" {
			sz.dd = dedupState{kind: ddKey, key: dedupKeyOf(m.Topic, k)}
			if s.dedupRebuilding.Load() {
				sz.dd.topic, sz.dd.raw = m.Topic, k
			}
		}
		return
	}
	rebuilding := s.dedupRebuilding.Load()
	b := r.Batch
	if !dedupTopic(b.Template.Topic) {
		return
	}
	th := dedupTopicOf(b.Template.Topic)
	for i, it := range b.Items {
		k, ok := message.PropertyValue(it.Properties, message.PropUniqKey)
		if !ok || k == "" {
			continue
		}
		if sz.members == nil {
			sz.members = make([]dedupState, len(b.Items))
		}
		sz.members[i] = dedupState{kind: ddKey, key: th.key(k)}
		if rebuilding {
			sz.members[i].topic, sz.members[i].raw = b.Template.Topic, k
		}
	}
}

// dedupCheck looks up the keys of reqs (see above) and reports whether any
// request met the window. REQUIRES: putMu held, s.dedup set.
func (s *Store) dedupCheck(reqs []PutRequest, sizes []sized) bool {
	w := s.dedup
	met := false
	now := w.nowMs()
	var stored func(*dedupState, int64) (dedupEntry, bool)
	if s.dedupRebuilding.Load() {
		stored = s.storedDup
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return false // NB: the store is closing; its appends are refused
	}
	for i := range reqs {
		sz := &sizes[i]
		if sz.n == 0 {
			continue
		}
		if sz.dd.kind == ddKey {
			met = true
			if w.meetLocked(&sz.dd, i, 0, now, stored) {
				sz.n = 0 // NB: answered in dedupRecord
			}
			continue
		}
		if sz.members == nil {
			continue
		}
		met = true
		dups := 0
		for k := range sz.members {
			if sz.members[k].kind == ddKey && w.meetLocked(&sz.members[k], i, k, now, stored) {
				dups++
			}
		}
		if dups > 0 {
			s.dropMembers(&reqs[i], sz, dups)
		}
	}
	w.mu.Unlock()
	return met
}

// meetLocked looks d's key up: a hit makes d a duplicate (true); a miss
// inserts a pending entry for member of request req. While the window is
// rebuilt, stored (non-nil) answers for the keys it may lack yet.
// REQUIRES: w.mu held.
func (w *dedupWindow) meetLocked(d *dedupState, req, member int, now int64, stored func(*dedupState, int64) (dedupEntry, bool)) bool {
	e, ok := w.lookupLocked(d.key, now)
	if !ok && stored != nil && d.raw != "" {
		if se, found := stored(d, now); found {
			e = w.entry(w.insertLocked(se, now))
			ok = true
		}
	}
	if !ok {
		d.kind = ddPending
		d.seq = w.insertLocked(dedupEntry{key: d.key, pos: pendingPos, queueOffset: int64(req), size: int32(member), ts: now}, now)
		w.misses.Add(1)
		return false
	}
	w.hits.Add(1)
	if e.pos == pendingPos {
		d.kind, d.req, d.member = ddRequest, int(e.queueOffset), int(e.size)
		return true
	}
	d.kind, d.e = ddWindow, *e
	return true
}

// dropMembers takes a batch's duplicate members out of what is appended:
// the request gets a copy of the batch with the others (none: n = 0).
func (s *Store) dropMembers(r *PutRequest, sz *sized, dups int) {
	b := *r.Batch
	b.Items = make([]message.BatchItem, 0, len(b.Items)-dups)
	items := make([]int, 0, len(b.Items))
	sz.n = 0
	for k, it := range r.Batch.Items {
		if d := sz.members[k].kind; d == ddWindow || d == ddRequest {
			continue
		}
		b.Items = append(b.Items, it)
		items = append(items, sz.items[k])
		sz.n += sz.items[k]
	}
	sz.items = items
	r.Batch = &b
}

// dedupRecord settles the window after the appends (see above).
// REQUIRES: putMu held, s.dedup set.
func (s *Store) dedupRecord(reqs []PutRequest, res []PutResult, sizes []sized) {
	w := s.dedup
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return // NB: closed after dedupCheck; nothing was stored
	}
	// First the stored (or failed) requests, then the duplicates, which
	// may repeat them.
	for i := range reqs {
		sz := &sizes[i]
		if sz.dd.kind == ddPending {
			if res[i].Stored() {
				w.fillLocked(sz.dd.seq, res[i].Pos, res[i].QueueOffset, res[i].StoreTimestamp, res[i].Size, res[i].QueueID)
			} else {
				w.removeLocked(sz.dd.key, sz.dd.seq)
			}
		}
		if sz.members == nil {
			continue
		}
		stored := 0
		for k := range sz.members {
			d := &sz.members[k]
			switch d.kind {
			case ddWindow, ddRequest:
				continue
			case ddPending:
				if res[i].Stored() {
					w.fillLocked(d.seq, res[i].Positions[stored], res[i].QueueOffset+int64(stored),
						res[i].StoreTimestamp, int32(sz.items[stored]), res[i].QueueID)
				} else {
					w.removeLocked(d.key, d.seq)
				}
			}
			stored++
		}
	}
	// NB: a duplicate of a request of this Submit reads that request's
	// result as the append left it, before settleBatch completes it.
	stored := res
	for i := range sizes {
		if repeatsRequest(&sizes[i]) {
			stored = slices.Clone(res)
			break
		}
	}
	for i := range reqs {
		sz := &sizes[i]
		switch {
		case sz.dd.kind == ddWindow || sz.dd.kind == ddRequest:
			res[i] = dupResult(&sz.dd, stored, sizes)
		case sz.members != nil:
			s.settleBatch(&reqs[i], &res[i], sz, stored, sizes)
		}
	}
}

// repeatsRequest reports whether a request (or one of its members)
// repeats another of its Submit.
func repeatsRequest(sz *sized) bool {
	if sz.dd.kind == ddRequest {
		return true
	}
	for k := range sz.members {
		if sz.members[k].kind == ddRequest {
			return true
		}
	}
	return false
}

// dupResult is the answer of a message that repeats d: the stored
// message's ids, or the failure of the request it repeats.
func dupResult(d *dedupState, res []PutResult, sizes []sized) PutResult {
	e := d.e
	if d.kind == ddRequest {
		src := &res[d.req]
		if !src.Stored() {
			return *src
		}
		e = memberEntry(src, &sizes[d.req], d.member)
	}
	return PutResult{Status: PutOK, Pos: e.pos, Size: e.size, QueueOffset: e.queueOffset,
		StoreTimestamp: e.ts, QueueID: e.queueID, Duplicates: 1}
}

// memberEntry is the window entry of member k of a stored request (k = 0
// for a message). REQUIRES: src stored.
func memberEntry(src *PutResult, sz *sized, k int) dedupEntry {
	if sz.members == nil {
		return dedupEntry{pos: src.Pos, size: src.Size, queueOffset: src.QueueOffset, ts: src.StoreTimestamp, queueID: src.QueueID}
	}
	// NB: member k is the j-th stored one; the ones before it that were
	// duplicates took no queue offset.
	j := 0
	for m := range k {
		if d := sz.members[m].kind; d != ddWindow && d != ddRequest {
			j++
		}
	}
	return dedupEntry{pos: src.Positions[j], size: int32(sz.items[j]), queueOffset: src.QueueOffset + int64(j),
		ts: src.StoreTimestamp, queueID: src.QueueID}
}

// settleBatch completes a batch's answer with its duplicate members: one
// position per member, in order, the first member's queue offset, and a
// Pos and Size covering every record (sync mode waits for them all).
func (s *Store) settleBatch(r *PutRequest, out *PutResult, sz *sized, res []PutResult, sizes []sized) {
	dups := 0
	for k := range sz.members {
		if d := sz.members[k].kind; d == ddWindow || d == ddRequest {
			dups++
		}
	}
	if dups == 0 {
		return
	}
	if sz.n > 0 && !out.Stored() {
		return // NB: the stored members' failure; a retry finds the others
	}
	full := make([]int64, len(sz.members))
	var first dedupEntry
	end, stored := int64(0), 0
	for k := range sz.members {
		var e dedupEntry
		switch d := &sz.members[k]; d.kind {
		case ddWindow:
			e = d.e
		case ddRequest:
			src := &res[d.req]
			if !src.Stored() {
				*out = *src
				return
			}
			e = memberEntry(src, &sizes[d.req], d.member)
		default:
			e = dedupEntry{pos: out.Positions[stored], size: int32(sz.items[stored]),
				queueOffset: out.QueueOffset + int64(stored), ts: out.StoreTimestamp, queueID: r.Batch.Template.QueueID}
			stored++
		}
		if k == 0 {
			first = e
		}
		full[k] = e.pos
		end = max(end, e.pos+int64(e.size))
	}
	*out = PutResult{Status: PutOK, Pos: first.pos, Size: int32(end - first.pos), QueueOffset: first.queueOffset,
		StoreTimestamp: first.ts, QueueID: first.queueID, Positions: full, Duplicates: dups}
}
