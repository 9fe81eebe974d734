package conf

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
)

// EnvPrefix starts the environment variable of every key: SLUICE_ followed by
// the key path upper-cased with "." replaced by "_" (store.flush →
// SLUICE_STORE_FLUSH).
const EnvPrefix = "SLUICE_"

// LoadBroker reads the broker configuration: defaults, overridden by SLUICE_
// environment variables, overridden by the YAML file at path ("" = no file).
// Unknown file keys, unparsable values and values Validate rejects are
// errors. Flags are the caller's to apply on the result (and re-Validate).
func LoadBroker(path string) (Broker, error) {
	return load(path, DefaultBroker(), Broker.Validate)
}

// LoadNameserver is LoadBroker for the nameserver; its keys (and so its
// variables, e.g. SLUICE_BROKER_EXPIRY) are those of Nameserver.
func LoadNameserver(path string) (Nameserver, error) {
	return load(path, DefaultNameserver(), Nameserver.Validate)
}

// EnvVar returns the environment variable that sets key.
func EnvVar(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// load builds T from def, the environment and the file at path.
//
// NB: viper ranks environment variables above the config file, while Sluice
// ranks the file above the environment (flags > file > env > defaults). So no
// AutomaticEnv: the environment is folded into the defaults layer, which the
// file layer then overrides. Registering every key as a default is also what
// makes UnmarshalExact see keys set nowhere else (viper#761).
func load[T any](path string, def T, validate func(T) error) (T, error) {
	var zero T
	ls := leaves(reflect.ValueOf(def), "")
	v := viper.New()
	var envErrs []error
	for _, l := range ls {
		val := l.val.Interface()
		name := EnvVar(l.key)
		// NB: an empty variable counts as unset, as with viper's AutomaticEnv.
		if s := os.Getenv(name); s != "" {
			parsed, err := parseValue(s, l.val.Type())
			if err != nil {
				envErrs = append(envErrs, fmt.Errorf("%w: %s=%q (key %s): %v", ErrBadEnv, name, s, l.key, err))
				continue
			}
			val = parsed
		}
		v.SetDefault(l.key, val)
	}
	if err := errors.Join(envErrs...); err != nil {
		return zero, err
	}
	source := "defaults and environment"
	if path != "" {
		source = path
		if err := mergeFile(v, path, ls); err != nil {
			return zero, err
		}
	}
	var out T
	if err := v.UnmarshalExact(&out, strictDecoding); err != nil {
		return zero, fmt.Errorf("conf: %s: %w", source, err)
	}
	if err := validate(out); err != nil {
		return zero, fmt.Errorf("conf: invalid configuration (%s):\n%w", source, err)
	}
	return out, nil
}

// mergeFile reads the YAML file at path into v's config layer after checking
// that every key in it is known.
func mergeFile(v *viper.Viper, path string, ls []leaf) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("conf: read config file: %w", err)
	}
	fv := viper.New()
	fv.SetConfigType("yaml")
	if err := fv.ReadConfig(bytes.NewReader(data)); err != nil {
		return fmt.Errorf("conf: parse config file %s: %w", path, err)
	}
	known := make(map[string]bool, len(ls))
	sections := make(map[string]bool)
	for _, l := range ls {
		known[l.key] = true
		for i, r := range l.key {
			if r == '.' {
				sections[l.key[:i]] = true
			}
		}
	}
	var errs []error
	keys := fv.AllKeys()
	slices.Sort(keys)
	for _, k := range keys {
		switch {
		case known[k] || fv.Get(k) == nil: // NB: "key:" with no value means unset.
		case sections[k]:
			errs = append(errs, fmt.Errorf("conf: %s: %q is a section: want a mapping of its keys", path, k))
		default:
			errs = append(errs, fmt.Errorf("%w %q in %s%s", ErrUnknownKey, k, path, suggest(k, ls)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// NB: AllSettings drops keys with no value, so "store:" left empty does
	// not shadow the store defaults.
	if err := v.MergeConfigMap(fv.AllSettings()); err != nil {
		return fmt.Errorf("conf: merge config file %s: %w", path, err)
	}
	return nil
}

// renamedKeys maps the last element of a renamed key to its new name and
// what changed.
var renamedKeys = map[string]string{
	"read_timeout": `frame_timeout: a limit for a whole frame, "30s" by default; 0 no longer disables it`,
}

// suggest returns `; did you mean "x"?` for the known key closest to k, if
// any is within two edits, or the new name of a renamed key.
func suggest(k string, ls []leaf) string {
	section, base := "", k
	if i := strings.LastIndexByte(k, '.'); i >= 0 {
		section, base = k[:i+1], k[i+1:]
	}
	if r, ok := renamedKeys[base]; ok {
		return "; renamed " + section + r
	}
	best, bestD := "", 3
	for _, l := range ls {
		if d := editDistance(k, l.key); d < bestD {
			best, bestD = l.key, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// strictDecoding turns off viper's weak typing (which would wrap overflowing
// integers and truncate fractions) in favour of strictHook.
func strictDecoding(c *mapstructure.DecoderConfig) {
	c.WeaklyTypedInput = false
	c.ErrorUnset = true
	c.DecodeHook = mapstructure.DecodeHookFuncType(strictHook)
}

var durationType = reflect.TypeFor[time.Duration]()

// strictHook converts file values: duration strings to time.Duration (a bare
// 0 is accepted, other numbers are not, as they would silently mean
// nanoseconds), and numbers to integer fields only when integral and in
// range. Other mismatches are left for mapstructure to report.
func strictHook(from, to reflect.Type, data any) (any, error) {
	if data == nil || from == to {
		return data, nil
	}
	rv := reflect.ValueOf(data)
	if to == durationType {
		if from.Kind() == reflect.String {
			d, err := time.ParseDuration(rv.String())
			if err != nil {
				return nil, fmt.Errorf("must be a duration such as \"500ms\" or \"2m\", got %q", rv.String())
			}
			return d, nil
		}
		if n, err := toInt64(rv); err == nil && n == 0 {
			return time.Duration(0), nil
		}
		return nil, fmt.Errorf("must be a duration string such as \"500ms\", got %v", data)
	}
	switch to.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := toInt64(rv)
		if err != nil {
			if errors.Is(err, errNotNumber) {
				return data, nil
			}
			return nil, fmt.Errorf("must be an integer, got %v: %w", data, err)
		}
		out := reflect.New(to).Elem()
		if out.OverflowInt(n) {
			return nil, fmt.Errorf("must fit in %s, got %v", to, data)
		}
		out.SetInt(n)
		return out.Interface(), nil
	}
	return data, nil
}

var errNotNumber = errors.New("not a number")

func toInt64(rv reflect.Value) (int64, error) {
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if rv.Uint() > math.MaxInt64 {
			return 0, errors.New("out of range")
		}
		return int64(rv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		f := rv.Float()
		if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
			return 0, errors.New("not integral or out of range")
		}
		return int64(f), nil
	}
	return 0, errNotNumber
}

// parseValue parses an environment string as a value of type t.
func parseValue(s string, t reflect.Type) (any, error) {
	out := reflect.New(t).Elem()
	switch {
	case t == durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, errors.New(`want a duration such as "500ms" or "2m"`)
		}
		out.SetInt(int64(d))
	case t.Kind() == reflect.String:
		out.SetString(s)
	case t.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, errors.New("want true or false")
		}
		out.SetBool(b)
	case out.CanInt():
		n, err := strconv.ParseInt(s, 10, t.Bits())
		if err != nil {
			return nil, fmt.Errorf("want a %d-bit decimal integer", t.Bits())
		}
		out.SetInt(n)
	case t.Kind() == reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, errors.New("want a number")
		}
		out.SetFloat(f)
	default:
		panic("conf: unsupported field type " + t.String()) // leaves rejects these first
	}
	return out.Interface(), nil
}
