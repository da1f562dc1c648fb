package console

import "net/http"

// The settings page: the whole config as YAML, to keep in Git (docs/console.md).

func (u *ui) settings(w http.ResponseWriter, r *http.Request) {
	snap := u.s.deps.Store.Snapshot()
	out, err := configYAML(u.s.exportedConfig(snap, u.s.now()), "")
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.render(w, r, http.StatusOK, "settings", page{Title: "Settings", Nav: "settings", Data: map[string]any{
		"YAML": string(out), "Sources": len(snap.Sources()), "Destinations": len(snap.Destinations()),
		"Audiences": len(snap.Audiences()), "Traits": len(snap.ComputedTraits()), "Addr": u.s.cfg.Addr,
	}})
}

// exportYAML downloads the config file.
func (u *ui) exportYAML(w http.ResponseWriter, r *http.Request) {
	headers(w)
	if err := u.s.exportConfig(w, r); err != nil {
		u.fail(w, r, err)
	}
}
