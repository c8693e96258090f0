; Names a JavaScript chunk uses: calls, constructors, imports, base classes.
(call_expression function: (identifier) @ref)
(call_expression function: (member_expression property: (property_identifier) @ref))
(new_expression constructor: (identifier) @ref)
(import_statement source: (string (string_fragment) @ref))
(import_specifier name: (identifier) @ref)
(class_heritage (identifier) @ref)
