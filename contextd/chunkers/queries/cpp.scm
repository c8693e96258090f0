; Names a C++ chunk uses: calls, includes, base classes.
(call_expression function: (identifier) @ref)
(call_expression function: (field_expression field: (field_identifier) @ref))
(call_expression function: (qualified_identifier) @ref)
(preproc_include path: (_) @ref)
(base_class_clause (type_identifier) @ref)
