package gateway

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// The gateway and Gitea must read a mutation's body the same way, or a worker can show the
// gateway one request and Gitea another. Gitea binds a body by its Content-Type (any
// header containing "form-urlencoded" is bound from the form, which for a JSON body is the
// URL query), and release builds decode JSON with encoding/json/v2: names matched exactly,
// duplicates refused. encoding/json (v1) matches names case-insensitively and keeps the
// last duplicate. So the gateway reads a body only when both readings must agree:
//
//   - the media type is exactly application/json, with at most a utf-8 charset;
//   - the body is valid UTF-8 and one JSON object, with nothing after it;
//   - every name is one the route's rule knows, spelt exactly, at most once (aliases of
//     one field count as one);
//   - every value has the field's JSON type.
//
// What it forwards is rebuilt to match: Content-Type exactly application/json, and no URL
// query on a body-checked route (decodeBody's caller drops it).

// fieldType is the JSON type a field must have. null is accepted for every type, as
// both decoders leave the field unset.
type fieldType int

const (
	typeString fieldType = iota
	typeInt
	typeBool
	typeStrings
	typeInts
	typeTime     // a date-time string
	typeZeroTime // a date-time string whose zero ("0001-01-01T00:00:00Z") counts as unset
	typeObject   // an object of the field's sub fields
	typeObjects  // an array of objects of the field's sub fields
)

// field is one name a body may carry.
type field struct {
	typ fieldType
	// zeroOnly: the field is accepted only with its zero value (null, "", 0, false, []),
	// as Gitea clients send every field of their option structs.
	zeroOnly bool
	// alias groups names Gitea reads as one field ("Do" and "do"): at most one may appear.
	alias string
	// set stores the value into the Write.
	set func(w *claim.Write, v string)
	// text marks a field whose string values are texts the worker wrote.
	text bool
	// sub are the fields of a typeObject or typeObjects value.
	sub map[string]field
}

// Names used more than once below.
const (
	nameBody          = "body"
	aliasTitle        = "title"
	nameMergeCommitID = "merge_commit_id"
	nameMessage       = "message"
)

// bodyRules are the fields of each body rule, exactly as Gitea 1.27 names them.
var bodyRules = map[claim.BodyRule]map[string]field{
	claim.BodyComment: {
		nameBody: {typ: typeString, text: true},
	},
	claim.BodyReview: {
		"event":     {typ: typeString, set: func(w *claim.Write, v string) { w.Event = v }},
		nameBody:    {typ: typeString, text: true},
		"commit_id": {typ: typeString, set: func(w *claim.Write, v string) { w.CommitID = v }},
		"comments":  {typ: typeObjects, sub: reviewCommentFields},
	},
	claim.BodyMerge: {
		"Do":                        {typ: typeString, alias: "do", set: setMergeStyle},
		"do":                        {typ: typeString, alias: "do", set: setMergeStyle},
		"MergeTitleField":           {typ: typeString, alias: aliasTitle, text: true},
		"merge_title_field":         {typ: typeString, alias: aliasTitle, text: true},
		"MergeMessageField":         {typ: typeString, alias: nameMessage, text: true},
		"merge_message_field":       {typ: typeString, alias: nameMessage, text: true},
		"MergeCommitID":             {typ: typeString, alias: nameMergeCommitID, zeroOnly: true},
		nameMergeCommitID:           {typ: typeString, alias: nameMergeCommitID, zeroOnly: true},
		"head_commit_id":            {typ: typeString, set: func(w *claim.Write, v string) { w.CommitID = v }},
		"force_merge":               {typ: typeBool, zeroOnly: true},
		"merge_when_checks_succeed": {typ: typeBool, zeroOnly: true},
		"delete_branch_after_merge": {typ: typeBool, zeroOnly: true},
	},
	claim.BodyOpenPull: {
		"head":                  {typ: typeString, set: func(w *claim.Write, v string) { w.PullHead = v }},
		"base":                  {typ: typeString, set: func(w *claim.Write, v string) { w.PullBase = v }},
		aliasTitle:              {typ: typeString, text: true},
		nameBody:                {typ: typeString, text: true},
		"assignee":              {typ: typeString, zeroOnly: true},
		"assignees":             {typ: typeStrings, zeroOnly: true},
		"reviewers":             {typ: typeStrings, zeroOnly: true},
		"team_reviewers":        {typ: typeStrings, zeroOnly: true},
		"milestone":             {typ: typeInt, zeroOnly: true},
		"labels":                {typ: typeInts, zeroOnly: true},
		"due_date":              {typ: typeTime, zeroOnly: true},
		"allow_maintainer_edit": {typ: typeBool, zeroOnly: true},
	},
	// One rule for the four contents API routes (a file created, updated or deleted, or a
	// commit of several): a name one of them does not know, Gitea ignores there, and the
	// gateway only reads more paths than that route writes.
	claim.BodyContents: {
		nameMessage:  {typ: typeString, set: func(w *claim.Write, v string) { w.Commits = append(w.Commits, v) }},
		"branch":     {typ: typeString, set: func(w *claim.Write, v string) { w.Branch = v }},
		"new_branch": {typ: typeString, set: func(w *claim.Write, v string) { w.NewBranch = v }},
		"content":    {typ: typeString},
		"sha":        {typ: typeString},
		"from_path":  {typ: typeString, set: addChangedPath},
		"files":      {typ: typeObjects, sub: changeFileFields},
		// Gitea's own: the caller's account as author and committer, dated now. Gitea
		// clients send them empty.
		"author":     {typ: typeObject, sub: identityFields},
		"committer":  {typ: typeObject, sub: identityFields},
		"dates":      {typ: typeObject, sub: commitDateFields},
		"signoff":    {typ: typeBool, zeroOnly: true},
		"force_push": {typ: typeBool, zeroOnly: true},
	},
}

// changeFileFields are the fields of one file of a contents API commit of several files.
var changeFileFields = map[string]field{
	"operation": {typ: typeString},
	"path":      {typ: typeString, set: addChangedPath},
	"content":   {typ: typeString},
	"sha":       {typ: typeString},
	"from_path": {typ: typeString, set: addChangedPath},
}

// identityFields are a commit author's or committer's: only empty values are forwarded.
var identityFields = map[string]field{
	"name":  {typ: typeString, zeroOnly: true},
	"email": {typ: typeString, zeroOnly: true},
}

// commitDateFields are a commit's dates: only unset ones are forwarded.
var commitDateFields = map[string]field{
	"author":    {typ: typeZeroTime, zeroOnly: true},
	"committer": {typ: typeZeroTime, zeroOnly: true},
}

// addChangedPath records a path a contents API commit writes, moves or deletes.
func addChangedPath(w *claim.Write, v string) {
	if v != "" {
		w.ChangedPaths = append(w.ChangedPaths, v)
	}
}

// reviewCommentFields are the fields of one inline review comment.
var reviewCommentFields = map[string]field{
	"path":         {typ: typeString},
	nameBody:       {typ: typeString, text: true},
	"old_position": {typ: typeInt},
	"new_position": {typ: typeInt},
}

// mergeStyles are the merge styles a merger may ask for. "manually-merged" would mark the
// pull request merged without merging it, so it is not one.
var mergeStyles = []string{"merge", "rebase", "rebase-merge", "squash", "fast-forward-only"}

func setMergeStyle(w *claim.Write, v string) {
	if v != "" && !slices.Contains(mergeStyles, v) {
		w.Forbidden = append(w.Forbidden, "Do="+v)
	}
}

// errBody is a body the gateway will not read (400 malformed_request).
var errBody = errors.New("body not readable as the route requires")

// JSONContentType reports whether a Content-Type header names a JSON body the way the
// gateway and Gitea both read as JSON: media type application/json and, at most, a utf-8
// charset.
func JSONContentType(header string) bool {
	mt, params, err := mime.ParseMediaType(header)
	if err != nil || mt != "application/json" {
		return false
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return false
		}
	}
	// Gitea picks the binding by substring: nothing else may appear in the header.
	lower := strings.ToLower(header)
	return !strings.Contains(lower, "form-urlencoded") && !strings.Contains(lower, "multipart")
}

// decodeBody reads a mutation's JSON body under its route's rule into write.
func decodeBody(b []byte, write *claim.Write) error {
	fields, ok := bodyRules[write.Route.Body]
	if !ok {
		return fmt.Errorf("%w: no body rule %q", errBody, write.Route.Body)
	}
	if !utf8.Valid(b) {
		return fmt.Errorf("%w: not valid UTF-8", errBody)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := decodeObject(dec, fields, write); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: data after the JSON object", errBody)
	}
	return nil
}

// decodeObject reads one JSON object whose names must be in fields.
func decodeObject(dec *json.Decoder, fields map[string]field, write *claim.Write) error {
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("%w: not a JSON object", errBody)
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %w", errBody, err)
		}
		name, _ := t.(string)
		f, known := fields[name]
		if !known {
			return fmt.Errorf("%w: unknown field %q (names are exact and case-sensitive)", errBody, name)
		}
		key := name
		if f.alias != "" {
			key = "alias:" + f.alias
		}
		if seen[key] {
			return fmt.Errorf("%w: field %q given twice", errBody, name)
		}
		seen[key] = true
		if err := decodeValue(dec, name, f, write); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return fmt.Errorf("%w: %w", errBody, err)
	}
	return nil
}

func decodeValue(dec *json.Decoder, name string, f field, write *claim.Write) error {
	if f.typ == typeObject || f.typ == typeObjects {
		return decodeNested(dec, name, f, write)
	}
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return fmt.Errorf("%w: field %q: %w", errBody, name, err)
	}
	if string(raw) == "null" {
		return nil
	}
	zero, str, err := typed(raw, f.typ)
	if err != nil {
		return fmt.Errorf("%w: field %q: %w", errBody, name, err)
	}
	if f.zeroOnly && !zero {
		write.Forbidden = append(write.Forbidden, cmp.Or(f.alias, name))
	}
	if f.text {
		write.Text = append(write.Text, str)
	}
	if f.set != nil {
		f.set(write, str)
	}
	return nil
}

// typed checks raw against t and reports whether it is t's zero value, with the string
// value for strings.
func typed(raw json.RawMessage, t fieldType) (zero bool, str string, err error) {
	switch t {
	case typeString:
		if err := json.Unmarshal(raw, &str); err != nil {
			return false, "", err
		}
		return str == "", str, nil
	case typeTime: // only null is a time's zero (handled by the caller)
		if err := json.Unmarshal(raw, &str); err != nil {
			return false, "", err
		}
		return false, "", nil
	case typeZeroTime:
		var v time.Time
		if err := json.Unmarshal(raw, &v); err != nil {
			return false, "", err
		}
		return v.IsZero(), "", nil
	case typeInt:
		var n int64
		if err := json.Unmarshal(raw, &n); err != nil {
			return false, "", err
		}
		return n == 0, "", nil
	case typeBool:
		var v bool
		if err := json.Unmarshal(raw, &v); err != nil {
			return false, "", err
		}
		return !v, "", nil
	case typeStrings:
		var v []string
		if err := json.Unmarshal(raw, &v); err != nil {
			return false, "", err
		}
		return len(v) == 0, "", nil
	case typeInts:
		var v []int64
		if err := json.Unmarshal(raw, &v); err != nil {
			return false, "", err
		}
		return len(v) == 0, "", nil
	}
	return false, "", fmt.Errorf("unknown field type %d", t)
}

// decodeNested reads a typeObject value (null or one object of f.sub) or a typeObjects
// value (null or an array of such objects).
func decodeNested(dec *json.Decoder, name string, f field, write *claim.Write) error {
	if f.typ == typeObject {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("%w: field %q: %w", errBody, name, err)
		}
		if string(raw) == "null" {
			return nil
		}
		sub := json.NewDecoder(bytes.NewReader(raw))
		sub.UseNumber()
		return decodeObject(sub, f.sub, write)
	}
	t, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errBody, name, err)
	}
	if t == nil {
		return nil
	}
	if t != json.Delim('[') {
		return fmt.Errorf("%w: %s must be an array", errBody, name)
	}
	for dec.More() {
		if err := decodeObject(dec, f.sub, write); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("%w: %s: %w", errBody, name, err)
	}
	return nil
}

// headFields name the commit a review or a merge is made at.
var headFields = map[claim.BodyRule]string{claim.BodyReview: "commit_id", claim.BodyMerge: "head_commit_id"}

// fillHead writes head into a review's or merge's body that named no commit
// (claim.WriteVerdict.FillHead). The body has passed decodeBody: one JSON object whose
// names are exact and given once, so setting the one name and encoding the object again
// changes nothing else Gitea reads.
func fillHead(b []byte, rule claim.BodyRule, head string) ([]byte, error) {
	name, ok := headFields[rule]
	if !ok {
		return nil, fmt.Errorf("%w: no head field in body rule %q", errBody, rule)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, fmt.Errorf("%w: %w", errBody, err)
	}
	v, err := json.Marshal(head)
	if err != nil {
		return nil, err
	}
	obj[name] = v
	return json.Marshal(obj)
}
