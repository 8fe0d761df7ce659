package giteaclaim

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// Timeline event types this package reads (Gitea's comment type names).
const (
	// timelinePullPush is a push to a pull request's head branch; its user is the pusher.
	timelinePullPush = "pull_push"
	// timelinePullRef is a cross-reference from a pull request to the issue.
	timelinePullRef = "pull_ref"
)

// timelineEvent is the part of one entry of /repos/{owner}/{repo}/issues/{n}/timeline
// this package reads. The SDK cannot decode the timeline, so it is read over plain HTTP.
type timelineEvent struct {
	Type string        `json:"type"`
	User *timelineUser `json:"user"`
	// Body of a pull_push event: {"is_force_push":…,"commit_ids":[…]}.
	Body     string `json:"body"`
	RefIssue *struct {
		Number    int64        `json:"number"`
		User      timelineUser `json:"user"`
		CreatedAt time.Time    `json:"created_at"`
		// PullRequest is set when the referencing item is a pull request.
		PullRequest *struct{} `json:"pull_request"`
		Repository  *struct {
			FullName string `json:"full_name"`
		} `json:"repository"`
	} `json:"ref_issue"`
}

// timelineUser is the account behind a timeline entry.
type timelineUser struct {
	ID    int64  `json:"id"`
	Login string `json:"login"`
}

// attributed reports whether u names a real account (not missing, not Gitea's ghost
// user of deleted accounts, which has a non-positive id).
func (u *timelineUser) attributed() bool {
	return u != nil && u.ID > 0 && strings.TrimSpace(u.Login) != ""
}

// readTimeline reads every entry of an issue's or pull request's timeline, oldest first.
// Gitea's X-Total-Count is not the entry count for timelines, so pages are read until one
// comes back short.
func (c *Client) readTimeline(ctx context.Context, owner, name string, number int64) ([]timelineEvent, error) {
	var out []timelineEvent
	for page := 1; ; page++ {
		var events []timelineEvent
		path := fmt.Sprintf("%s/timeline?page=%d&limit=%d", issuePath(owner, name, number), page, listPageSize)
		if err := c.doJSON(ctx, http.MethodGet, path, nil, &events); err != nil {
			return nil, err
		}
		out = append(out, events...)
		if len(events) < listPageSize {
			return out, nil
		}
	}
}

// timelineFacts is what a timeline says for a claim decision.
type timelineFacts struct {
	// pushers are the accounts Gitea recorded pushing to the pull request.
	pushers []string
	// unattributed counts pushes Gitea attributes to no account.
	unattributed int
	// referencing are the pull requests cross-referencing the issue.
	referencing []claim.PullReference
}

// factsOf reads pushes and pull request cross-references out of a timeline.
func factsOf(events []timelineEvent) timelineFacts {
	var f timelineFacts
	for _, ev := range events {
		switch ev.Type {
		case timelinePullPush:
			if ev.User.attributed() {
				f.pushers = append(f.pushers, ev.User.Login)
			} else {
				f.unattributed++
			}
		case timelinePullRef:
			ri := ev.RefIssue
			if ri == nil || ri.PullRequest == nil {
				continue
			}
			ref := claim.PullReference{Number: ri.Number, Author: ri.User.Login, CreatedAt: ri.CreatedAt.UTC()}
			if ri.Repository != nil {
				ref.Repository = ri.Repository.FullName
			}
			f.referencing = append(f.referencing, ref)
		}
	}
	return f
}

// coAuthorLine matches a Co-authored-by trailer line (any line of the message: a trailer
// outside the last paragraph still names a co-author, and counting it fails closed).
var (
	coAuthorLine  = regexp.MustCompile(`(?im)^[ \t]*co-authored-by[ \t]*:[ \t]*(.*?)[ \t]*$`)
	bracketedMail = regexp.MustCompile(`<([^<>\s]+@[^<>\s]+)>`)
	bareMail      = regexp.MustCompile(`^[^<>\s]+@[^<>\s]+$`)
)

// CoAuthors returns the co-authors a commit message names in Co-authored-by trailers:
// their e-mails (lower-cased) and, for trailers whose e-mail cannot be read, the trailer
// value itself (prefixed "co-authored-by:"), which no account can be mapped to.
func CoAuthors(message string) (emails, unreadable []string) {
	for _, m := range coAuthorLine.FindAllStringSubmatch(message, -1) {
		value := strings.TrimSpace(m[1])
		if mm := bracketedMail.FindStringSubmatch(value); mm != nil {
			emails = append(emails, strings.ToLower(mm[1]))
			continue
		}
		if bareMail.MatchString(value) {
			emails = append(emails, strings.ToLower(value))
			continue
		}
		unreadable = append(unreadable, "co-authored-by:"+value)
	}
	return emails, unreadable
}

// emailAccount maps an e-mail to the Gitea account that owns it as a verified address
// (primary or secondary), through the administrator's e-mail search. "" when no account
// owns it verified, or the token may not search e-mails (an e-mail nobody can map makes
// independence unprovable, so this fails closed).
func (c *Client) emailAccount(ctx context.Context, email string) (string, error) {
	var found []struct {
		Email    string `json:"email"`
		Verified bool   `json:"verified"`
		Username string `json:"username"`
	}
	path := "/admin/emails/search?limit=" + fmt.Sprint(listPageSize) + "&q=" + url.QueryEscape(email)
	if err := c.doJSON(ctx, http.MethodGet, path, nil, &found); err != nil {
		var api *APIError
		if errors.As(err, &api) && (api.StatusCode == http.StatusForbidden || api.StatusCode == http.StatusNotFound) {
			return "", nil
		}
		return "", fmt.Errorf("mapping a co-author e-mail to an account: %w", err)
	}
	for _, e := range found {
		if e.Verified && strings.EqualFold(strings.TrimSpace(e.Email), email) && e.Username != "" {
			return e.Username, nil
		}
	}
	return "", nil
}
