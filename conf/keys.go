package conf

import (
	"reflect"
	"strconv"
	"strings"
	"time"
)

// leaf is one configurable value: its key path and its value in a struct.
type leaf struct {
	key string
	val reflect.Value
}

// leaves lists the leaf fields of the config struct v in declaration order,
// keyed by their mapstructure tags joined with ".". The tags are the only
// place keys are spelled; defaults, environment variables, unknown-key checks
// and Dump all derive from this walk.
func leaves(v reflect.Value, prefix string) []leaf {
	var out []leaf
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("mapstructure")
		if tag == "" || !f.IsExported() {
			panic("conf: field " + t.Name() + "." + f.Name + " needs a mapstructure tag") // INVARIANT: every field is a key
		}
		key := prefix + tag
		fv := v.Field(i)
		if fv.Kind() == reflect.Struct && fv.Type() != durationType {
			out = append(out, leaves(fv, key+".")...)
			continue
		}
		switch fv.Kind() {
		case reflect.String, reflect.Bool, reflect.Int, reflect.Int32, reflect.Int64, reflect.Float64:
		default:
			panic("conf: field " + key + " has unsupported type " + fv.Type().String())
		}
		out = append(out, leaf{key: key, val: fv})
	}
	return out
}

// Dump renders b as YAML that LoadBroker reads back to b, for logging the
// effective configuration at startup.
func (b Broker) Dump() string { return dump(reflect.ValueOf(b)) }

// Dump renders n as YAML that LoadNameserver reads back to n.
func (n Nameserver) Dump() string { return dump(reflect.ValueOf(n)) }

func dump(v reflect.Value) string {
	var sb strings.Builder
	dumpStruct(&sb, v, "")
	return sb.String()
}

func dumpStruct(sb *strings.Builder, v reflect.Value, indent string) {
	t := v.Type()
	for i := range t.NumField() {
		tag := t.Field(i).Tag.Get("mapstructure")
		fv := v.Field(i)
		sb.WriteString(indent + tag + ":")
		if fv.Kind() == reflect.Struct {
			sb.WriteString("\n")
			dumpStruct(sb, fv, indent+"  ")
			continue
		}
		if tag == "secret_key" && fv.String() != "" {
			sb.WriteString(" \"(not shown)\"\n") // NB: a dump may be logged; secrets stay out
			continue
		}
		sb.WriteString(" " + formatValue(fv) + "\n")
	}
}

// formatValue writes one leaf as a YAML scalar. NB: strconv.Quote's escapes
// are a subset of YAML double-quoted ones.
func formatValue(v reflect.Value) string {
	switch {
	case v.Type() == durationType:
		return strconv.Quote(time.Duration(v.Int()).String())
	case v.Kind() == reflect.String:
		return strconv.Quote(v.String())
	case v.Kind() == reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case v.Kind() == reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	default:
		return strconv.FormatInt(v.Int(), 10)
	}
}

// Key is one configuration key as a file, the environment and the
// documentation spell it.
type Key struct {
	Path    string // e.g. "store.flush"
	Env     string // e.g. "SLUICE_STORE_FLUSH"
	Default string // the default as a YAML scalar, e.g. "\"async\""
}

// BrokerKeys lists mqbroker's keys in declaration order (the order of
// conf/broker.yaml).
func BrokerKeys() []Key { return keyList(reflect.ValueOf(DefaultBroker())) }

// NameserverKeys lists mqnamesrv's keys in declaration order.
func NameserverKeys() []Key { return keyList(reflect.ValueOf(DefaultNameserver())) }

// ControllerKeys lists mqcontroller's keys in declaration order.
func ControllerKeys() []Key { return keyList(reflect.ValueOf(DefaultControllerServer())) }

func keyList(v reflect.Value) []Key {
	ls := leaves(v, "")
	out := make([]Key, 0, len(ls))
	for _, l := range ls {
		out = append(out, Key{Path: l.key, Env: EnvVar(l.key), Default: formatValue(l.val)})
	}
	return out
}
