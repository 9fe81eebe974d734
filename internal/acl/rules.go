package acl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sluicemq/sluice/internal/acl/sig"
)

// File is a rules file in RocketMQ's plain_acl.yml shape, as decoded (by
// LoadFile). Compile validates it.
type File struct {
	GlobalWhiteRemoteAddresses []string  `mapstructure:"globalWhiteRemoteAddresses"`
	Accounts                   []Account `mapstructure:"accounts"`
}

// Account is one entry of File.Accounts.
type Account struct {
	AccessKey          string   `mapstructure:"accessKey"`
	SecretKey          string   `mapstructure:"secretKey"`
	WhiteRemoteAddress string   `mapstructure:"whiteRemoteAddress"`
	Admin              bool     `mapstructure:"admin"`
	DefaultTopicPerm   string   `mapstructure:"defaultTopicPerm"`
	DefaultGroupPerm   string   `mapstructure:"defaultGroupPerm"`
	TopicPerms         []string `mapstructure:"topicPerms"`
	GroupPerms         []string `mapstructure:"groupPerms"`
}

// RetryPrefix starts the resource name of a group (RocketMQ stores group
// permissions as %RETRY%group).
const RetryPrefix = "%RETRY%"

// Rules is a compiled, immutable File.
type Rules struct {
	global   []Pattern // empty: no global restriction
	accounts map[string]*account
}

type account struct {
	key, secret  string
	verifier     *sig.Verifier
	white        Pattern // unset: any address
	admin        bool
	defaultTopic Perm
	defaultGroup Perm
	perms        map[string]Perm // topics by name, groups as %RETRY%group; nil: no lists
}

// Minimum lengths RocketMQ's PlainPermissionManager enforces.
const (
	minAccessKey = 6
	minSecretKey = 6
)

// Compile validates f and returns its rules. The error joins one
// FieldError per problem, each naming its field.
func Compile(f File) (*Rules, error) {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	r := &Rules{accounts: make(map[string]*account, len(f.Accounts))}
	for i, s := range f.GlobalWhiteRemoteAddresses {
		p, err := ParsePattern(s)
		if err != nil {
			bad(fmt.Sprintf("globalWhiteRemoteAddresses[%d]", i), "%v", err)
		}
		r.global = append(r.global, p)
	}
	for i, a := range f.Accounts {
		at := func(field string) string { return fmt.Sprintf("accounts[%d].%s", i, field) }
		acc := &account{key: a.AccessKey, secret: a.SecretKey, verifier: sig.NewVerifier(a.SecretKey), admin: a.Admin,
			defaultTopic: Deny, defaultGroup: Deny}
		switch {
		case len(a.AccessKey) < minAccessKey:
			bad(at("accessKey"), "%q: want at least %d characters", a.AccessKey, minAccessKey)
		case strings.ContainsAny(a.AccessKey, " \t\r\n"):
			bad(at("accessKey"), "%q: no spaces", a.AccessKey)
		case r.accounts[a.AccessKey] != nil:
			bad(at("accessKey"), "%q is already an account's key", a.AccessKey)
		}
		if len(a.SecretKey) < minSecretKey {
			// NB: never the secret itself, not even when it is wrong.
			bad(at("secretKey"), "want at least %d characters (it has %d)", minSecretKey, len(a.SecretKey))
		}
		var err error
		if acc.white, err = ParsePattern(a.WhiteRemoteAddress); err != nil {
			bad(at("whiteRemoteAddress"), "%v", err)
		}
		if a.DefaultTopicPerm != "" {
			if acc.defaultTopic, err = ParsePerm(a.DefaultTopicPerm); err != nil {
				bad(at("defaultTopicPerm"), "%v", err)
			}
		}
		if a.DefaultGroupPerm != "" {
			if acc.defaultGroup, err = ParsePerm(a.DefaultGroupPerm); err != nil {
				bad(at("defaultGroupPerm"), "%v", err)
			}
		}
		if len(a.TopicPerms)+len(a.GroupPerms) > 0 {
			acc.perms = make(map[string]Perm, len(a.TopicPerms)+len(a.GroupPerms))
		}
		for j, s := range a.TopicPerms {
			if err := acc.addPerm("", s); err != nil {
				bad(fmt.Sprintf("accounts[%d].topicPerms[%d]", i, j), "%v", err)
			}
		}
		for j, s := range a.GroupPerms {
			if err := acc.addPerm(RetryPrefix, s); err != nil {
				bad(fmt.Sprintf("accounts[%d].groupPerms[%d]", i, j), "%v", err)
			}
		}
		if r.accounts[a.AccessKey] == nil {
			r.accounts[a.AccessKey] = acc
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return r, nil
}

// addPerm reads "name=PERM" into a.perms under prefix+name.
func (a *account) addPerm(prefix, s string) error {
	name, perm, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return fmt.Errorf("%q: want name=PERM, as in orders=PUB|SUB", s)
	}
	p, err := ParsePerm(perm)
	if err != nil {
		return err
	}
	if _, dup := a.perms[prefix+name]; dup {
		return fmt.Errorf("%q is listed twice", name)
	}
	a.perms[prefix+name] = p
	return nil
}

// Accounts returns the number of accounts.
func (r *Rules) Accounts() int { return len(r.accounts) }

// BrokerAccount reports whether key names an admin account whose secret
// signs content as signature (base64 HMAC-SHA1), compared in constant
// time: a slave broker opening its replication connection.
func (r *Rules) BrokerAccount(key string, content []byte, signature string) bool {
	a := r.accounts[key]
	return a != nil && a.admin && sig.EqualConstant(sig.Sign(a.secret, content), signature)
}

// Login reports whether secret is key's (compared in constant time) and
// whether key is an admin account: the console's login.
func (r *Rules) Login(key, secret string) (admin, ok bool) {
	a := r.accounts[key]
	if a == nil || !sig.EqualConstant(a.secret, secret) {
		return false, false
	}
	return a.admin, true
}

// Credentials returns the basic-auth check of HTTP endpoints: whether key
// names an account whose secret is secret (compared in constant time).
func (r *Rules) Credentials(key, secret string) bool {
	a := r.accounts[key]
	return a != nil && sig.EqualConstant(a.secret, secret)
}
