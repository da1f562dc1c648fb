package analytics

// The message structs carry exactly the fields of docs/client.md#calls-and-messages. Every one
// also has Timestamp (historical import), Context and Integrations; the library adds
// type, messageId, context.library and, when Timestamp is empty, the call time.

// Identify ties a user to their traits.
type Identify struct {
	// UserId is the user's ID in your database. UserId or AnonymousId is required.
	UserId string
	// AnonymousId identifies a user who is not known yet.
	AnonymousId string
	// Traits of the user (email, name, plan, ...).
	Traits map[string]any
	// Timestamp is when the call happened, ISO 8601 (e.g. "2024-05-01T10:00:00.000Z"); it is
	// sent exactly as given. Empty: the time of the call. See Time.
	Timestamp string
	// Context is extra information about the call, not attributes of the user. The library
	// sets its "library" key.
	Context map[string]any
	// Integrations switches destinations on and off for this call.
	Integrations Integrations
}

// Track records an action the user performed.
type Track struct {
	// Event is the name of the action, e.g. "Order Completed". Required.
	Event string
	// UserId or AnonymousId is required.
	UserId      string
	AnonymousId string
	// Properties are free-form details of the event.
	Properties map[string]any
	// Timestamp, Context and Integrations: as on Identify.
	Timestamp    string
	Context      map[string]any
	Integrations Integrations
}

// Page records a page view.
type Page struct {
	// UserId or AnonymousId (used when the user is unknown) is required.
	UserId      string
	AnonymousId string
	// Category of the page.
	Category string
	// Name of the page.
	Name string
	// Traits of the page view: "url", "title", "referrer" and "path" are recognised, other
	// keys are allowed. They travel as the message's "properties", where the Segment spec and
	// the webhooks destination put page details.
	Traits map[string]any
	// Timestamp, Context and Integrations: as on Identify.
	Timestamp    string
	Context      map[string]any
	Integrations Integrations
}

// Screen records a screen view in a mobile app: Page's twin for screens.
type Screen struct {
	// UserId or AnonymousId is required.
	UserId      string
	AnonymousId string
	// Category of the screen.
	Category string
	// Name of the screen.
	Name string
	// Traits of the screen view; they travel as the message's "properties".
	Traits map[string]any
	// Timestamp, Context and Integrations: as on Identify.
	Timestamp    string
	Context      map[string]any
	Integrations Integrations
}

// Group associates a user with a group: a company, organization, account, project or team.
type Group struct {
	// UserId or AnonymousId is required.
	UserId      string
	AnonymousId string
	// GroupId identifies the group. Required.
	GroupId string
	// Traits of the group.
	Traits map[string]any
	// Timestamp, Context and Integrations: as on Identify.
	Timestamp    string
	Context      map[string]any
	Integrations Integrations
}

// Alias merges two identities of one user.
type Alias struct {
	// UserId is the new identity. Required.
	UserId string
	// PreviousId is the identity to alias from. Required.
	PreviousId string
	// Timestamp, Context and Integrations: as on Identify.
	Timestamp    string
	Context      map[string]any
	Integrations Integrations
}

// Message is one of *Identify, *Track, *Page, *Screen, *Group or *Alias: what a Callback is
// handed back. Type returns the message's type as sent ("identify", "track", ...).
type Message interface {
	Type() string
	validate() *ValidationError
}

// Message types, as sent in the "type" field.
const (
	TypeIdentify = "identify"
	TypeTrack    = "track"
	TypePage     = "page"
	TypeScreen   = "screen"
	TypeGroup    = "group"
	TypeAlias    = "alias"
)

func (*Identify) Type() string { return TypeIdentify }
func (*Track) Type() string    { return TypeTrack }
func (*Page) Type() string     { return TypePage }
func (*Screen) Type() string   { return TypeScreen }
func (*Group) Type() string    { return TypeGroup }
func (*Alias) Type() string    { return TypeAlias }

var (
	_ Message = (*Identify)(nil)
	_ Message = (*Track)(nil)
	_ Message = (*Page)(nil)
	_ Message = (*Screen)(nil)
	_ Message = (*Group)(nil)
	_ Message = (*Alias)(nil)
)

func requireIdentity(typ, userID, anonymousID string) *ValidationError {
	if userID == "" && anonymousID == "" {
		return &ValidationError{Type: typ, Field: "userId", Reason: "userId or anonymousId is required"}
	}
	return nil
}

func (m *Identify) validate() *ValidationError {
	if m == nil {
		return nilMessage(TypeIdentify)
	}
	return requireIdentity(TypeIdentify, m.UserId, m.AnonymousId)
}

func (m *Track) validate() *ValidationError {
	if m == nil {
		return nilMessage(TypeTrack)
	}
	if err := requireIdentity(TypeTrack, m.UserId, m.AnonymousId); err != nil {
		return err
	}
	if m.Event == "" {
		return &ValidationError{Type: TypeTrack, Field: "event", Reason: "required"}
	}
	return nil
}

func (m *Page) validate() *ValidationError {
	if m == nil {
		return nilMessage(TypePage)
	}
	return requireIdentity(TypePage, m.UserId, m.AnonymousId)
}

func (m *Screen) validate() *ValidationError {
	if m == nil {
		return nilMessage(TypeScreen)
	}
	return requireIdentity(TypeScreen, m.UserId, m.AnonymousId)
}

func (m *Group) validate() *ValidationError {
	if m == nil {
		return nilMessage(TypeGroup)
	}
	if err := requireIdentity(TypeGroup, m.UserId, m.AnonymousId); err != nil {
		return err
	}
	if m.GroupId == "" {
		return &ValidationError{Type: TypeGroup, Field: "groupId", Reason: "required"}
	}
	return nil
}

func (m *Alias) validate() *ValidationError {
	if m == nil {
		return nilMessage(TypeAlias)
	}
	if m.UserId == "" {
		return &ValidationError{Type: TypeAlias, Field: "userId", Reason: "required"}
	}
	if m.PreviousId == "" {
		return &ValidationError{Type: TypeAlias, Field: "previousId", Reason: "required"}
	}
	return nil
}

func nilMessage(typ string) *ValidationError {
	return &ValidationError{Type: typ, Reason: "nil message"}
}

// Integrations selects the destinations of one call (docs/client.md#selecting-destinations): a map from destination
// name (case-sensitive, e.g. "Webhooks") to true or false; the key "All" set to false turns
// off every destination not explicitly set to true. Values other than booleans are passed
// through as per-destination options. Build it as a literal,
//
//	analytics.Integrations{"All": false, "Webhooks": true}
//
// or with the chainable helpers,
//
//	analytics.NewIntegrations().DisableAll().Enable("Webhooks")
//
// A nil Integrations (the default) leaves every destination enabled.
type Integrations map[string]any

// NewIntegrations returns an empty Integrations (every destination enabled).
func NewIntegrations() Integrations { return Integrations{} }

// Enable turns the named destination on and returns i.
func (i Integrations) Enable(name string) Integrations { i[name] = true; return i }

// Disable turns the named destination off and returns i.
func (i Integrations) Disable(name string) Integrations { i[name] = false; return i }

// EnableAll sets "All" to true and returns i.
func (i Integrations) EnableAll() Integrations { return i.Enable("All") }

// DisableAll sets "All" to false (only destinations set to true receive the call) and
// returns i.
func (i Integrations) DisableAll() Integrations { return i.Disable("All") }

// Set stores per-destination options under name and returns i.
func (i Integrations) Set(name string, options any) Integrations { i[name] = options; return i }
