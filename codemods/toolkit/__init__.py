"""LibCST helpers the codemods share: names and nodes (:mod:`.cstutil`,
:mod:`.node_index`), positions and printing (:mod:`.positions`,
:mod:`.codegen_positions`, :mod:`.kept_text`), bodies left unparsed (:mod:`.unparsed`),
imports (:mod:`.imports`, :mod:`.import_order`) and the target's layout and formatter
(:mod:`.layout`, :mod:`.formatting`)."""
