"""Who may call what: bearer tokens, roles, the principal of a call and the audit of mutating calls."""
