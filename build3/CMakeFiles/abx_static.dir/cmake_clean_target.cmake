file(REMOVE_RECURSE
  "libabx.a"
)
