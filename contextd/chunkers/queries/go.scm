; Names a Go chunk uses: calls and imports.
(call_expression function: (identifier) @ref)
(call_expression function: (selector_expression field: (field_identifier) @ref))
(import_spec path: (interpreted_string_literal) @ref)
