package schemas

import (
	"strings"
	"unicode/utf8"
)

// FieldError is one broken rule, naming the field.
type FieldError struct {
	Field   string
	Message string
}

func (e FieldError) Error() string { return e.Field + ": " + e.Message }

// ValidationError lists every rule a message breaks.
type ValidationError struct {
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	for i, f := range e.Fields {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(f.Error())
	}
	return b.String()
}

// Validate checks the rules of docs/ingest.md#request-format for a call a client sent: a known type; userId or
// anonymousId on every call; event on track; groupId on group; userId and previousId on
// alias; messageId at most MaxMessageIDLength characters, without control characters or
// leading or trailing spaces (CheckMessageID: it becomes a header of every webhook). It returns
// nil or a *ValidationError.
func (m *Message) Validate() error {
	var fs []FieldError
	add := func(field, msg string) { fs = append(fs, FieldError{field, msg}) }
	switch m.Type {
	case "":
		add("type", "required")
	case TypeIdentify, TypeTrack, TypePage, TypeScreen, TypeGroup:
		if m.UserID == "" && m.AnonymousID == "" {
			add("userId", "userId or anonymousId is required")
		}
	case TypeAlias:
		if m.UserID == "" {
			add("userId", "required")
		}
		if m.PreviousID == "" {
			add("previousId", "required")
		}
	default:
		add("type", `unknown type "`+m.Type+`" (want identify, track, page, screen, group or alias)`)
	}
	switch m.Type {
	case TypeTrack:
		if m.Event == "" {
			add("event", "required")
		}
	case TypeGroup:
		if m.GroupID == "" {
			add("groupId", "required")
		}
	}
	if utf8.RuneCountInString(m.MessageID) > MaxMessageIDLength {
		add("messageId", "longer than 100 characters")
	} else if err := CheckMessageID(m.MessageID); err != nil {
		add("messageId", err.Error())
	}
	if fs == nil {
		return nil
	}
	return &ValidationError{Fields: fs}
}
