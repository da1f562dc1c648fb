package console

import (
	"fmt"
	"net/http"
)

// The settings page: the whole config as YAML, to keep in Git (docs/console.md).

func (u *ui) settings(w http.ResponseWriter, r *http.Request) {
	snap := u.s.deps.Store.Snapshot()
	cfg, comments := u.s.exportedConfig(snap, u.s.now())
	out, err := configYAML(cfg, "", comments)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	data := map[string]any{
		"YAML": string(out), "Sources": len(snap.Sources()), "Destinations": len(snap.Destinations()),
		"Audiences": len(snap.Audiences()), "Traits": len(snap.ComputedTraits()), "Addr": u.s.cfg.Addr,
	}
	if u.s.keys != nil {
		data["KeyID"] = u.s.keys.KeyIDs()[0]
		unsealed := 0
		for _, o := range objectsOf(snap) {
			if snap.NeedsSealing(o.Kind, o.ID) {
				unsealed++
			}
		}
		data["Unsealed"] = unsealed
	}
	u.render(w, r, http.StatusOK, "settings", page{Title: "Settings", Nav: "settings", Data: data})
}

// reencrypt is the settings page's button: POST /v1/config/reencrypt.
func (u *ui) reencrypt(w http.ResponseWriter, r *http.Request) {
	res, err := u.s.reencryptObjects(r.Context())
	if err != nil {
		u.fail(w, r, err)
		return
	}
	done := fmt.Sprintf("Every secret is encrypted with key %s: %s written again. The records they replace stay in %s until compaction (docs/configuration.md#secrets-at-rest).",
		res.KeyID, plural(len(res.Reencrypted), "destination", "destinations"), u.s.cfg.ConfigTopic)
	if len(res.Reencrypted) == 0 {
		done = "Every secret was encrypted with key " + res.KeyID + " already: nothing was written."
	}
	u.redirect(w, r, "/settings", done)
}

// exportYAML downloads the config file.
func (u *ui) exportYAML(w http.ResponseWriter, r *http.Request) {
	headers(w)
	out, err := u.s.exportYAML()
	if err == nil {
		err = downloadYAML(w, out)
	}
	if err != nil {
		u.fail(w, r, err)
	}
}
