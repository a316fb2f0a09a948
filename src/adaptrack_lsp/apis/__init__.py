"""What exists, where: the API knowledge the checks consult.

Environments and interpreters, jedi and runtime introspection, snapshots and their
caches, the imports a document binds.  `index.APIIndex` answers "which members does
this path have, which keywords does this call take"; the checks in `constrainers/`
ask it and never walk an environment themselves.
"""
