; Names a Kotlin chunk uses: calls, imports, supertypes.
(call_expression (simple_identifier) @ref)
(call_expression (navigation_expression (navigation_suffix (simple_identifier) @ref)))
(import_header (identifier) @ref)
(delegation_specifier (user_type (type_identifier) @ref))
(delegation_specifier (constructor_invocation (user_type (type_identifier) @ref)))
