; Names a C chunk uses: calls and includes.
(call_expression function: (identifier) @ref)
(preproc_include path: (_) @ref)
