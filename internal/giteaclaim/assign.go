package giteaclaim

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// assigneesPatch edits only the assignees of an issue (the body and its content_version
// are not touched).
type assigneesPatch struct {
	Assignees []string `json:"assignees"`
}

// Assign assigns the target to login, so a person sees who holds it. It is a plain,
// unguarded read and write of its own; a claim is assigned by the guarded write that
// publishes its record instead ([Assigning]), at no extra request. An issue
// already assigned to login (compared case-insensitively, as Gitea logins are) is left
// alone.
func (c *Client) Assign(ctx context.Context, t claim.Target, login string) error {
	return c.editAssignees(ctx, t, login, true)
}

// Unassign removes login from the target's assignees, keeping everyone else. Nothing is
// written when login is not assigned. A claim's end removes its assignment in the write
// that ends its record ([Client.Clear] with [Assigning]); Unassign is for an assignment
// whose record someone else rewrote.
func (c *Client) Unassign(ctx context.Context, t claim.Target, login string) error {
	return c.editAssignees(ctx, t, login, false)
}

func (c *Client) editAssignees(ctx context.Context, t claim.Target, login string, assign bool) error {
	login = strings.TrimSpace(login)
	if login == "" {
		return fmt.Errorf("%w: assignee login is empty", ErrInvalidArgument)
	}
	owner, name, err := validateTarget(t)
	if err != nil {
		return err
	}
	is, err := c.readIssue(ctx, t)
	if err != nil {
		return err
	}
	current := is.assigneeLogins()
	found := false
	next := make([]string, 0, len(current)+1)
	for _, a := range current {
		if strings.EqualFold(a, login) {
			found = true
			if !assign {
				continue
			}
		}
		next = append(next, a)
	}
	if found == assign {
		return nil // already as asked
	}
	if assign {
		next = append(next, login)
	}
	if err := c.doJSON(ctx, http.MethodPatch, issuePath(owner, name, t.Number), assigneesPatch{Assignees: next}, nil); err != nil {
		return fmt.Errorf("setting the assignees of %s: %w", t, err)
	}
	return nil
}
