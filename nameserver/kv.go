package nameserver

import (
	"maps"
	"sync"
)

// kvTable is the body of GET_KVLIST_BY_NAMESPACE and REGISTER_BROKER
// responses (RocketMQ's KVTable).
type kvTable struct {
	Table map[string]string `json:"table"`
}

// kvStore is the namespace → key → value configuration store of
// PUT/GET/DELETE_KV_CONFIG. It lives in memory only: Sluice's nameserver
// keeps no disk state (DESIGN.md), so values are lost on restart.
type kvStore struct {
	mu sync.RWMutex
	ns map[string]map[string]string // guarded by mu; no empty inner map
}

func newKVStore() *kvStore { return &kvStore{ns: make(map[string]map[string]string)} }

func (s *kvStore) put(namespace, key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.ns[namespace]
	if m == nil {
		m = make(map[string]string)
		s.ns[namespace] = m
	}
	m[key] = value
}

func (s *kvStore) get(namespace, key string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.ns[namespace][key]
	return v, ok
}

func (s *kvStore) del(namespace, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.ns[namespace]; m != nil {
		delete(m, key)
		if len(m) == 0 {
			delete(s.ns, namespace)
		}
	}
}

// list returns a copy of namespace's table, or false when it has no key.
func (s *kvStore) list(namespace string) (map[string]string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, ok := s.ns[namespace]
	return maps.Clone(m), ok
}
