"""What runs the codemods: the walk of the given paths and the files read
(:mod:`.source`), the pipeline's stages (:mod:`.pipeline`: read, parse, plan, run the
tasks, collect) and its tasks (:mod:`.tasks`: plan, rewrite and verify one group or
file), the decision of which files a codemod may change (:mod:`.decision`, :mod:`.replay`),
the verification (:mod:`.verify`, :mod:`.typecheck`), the refusals and results
(:mod:`.refusal`, :mod:`.results`), the report (:mod:`.report`), the list of codemods
(:mod:`.registry`, :mod:`.command`) and the run that writes (:mod:`.run`)."""
