; Names a TypeScript chunk uses: calls, constructors, imports, heritage.
(call_expression function: (identifier) @ref)
(call_expression function: (member_expression property: (property_identifier) @ref))
(new_expression constructor: (identifier) @ref)
(import_statement source: (string (string_fragment) @ref))
(import_specifier name: (identifier) @ref)
(extends_clause value: (identifier) @ref)
(implements_clause (type_identifier) @ref)
(extends_type_clause (type_identifier) @ref)
