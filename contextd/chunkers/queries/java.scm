; Names a Java chunk uses: calls, constructors, imports, supertypes.
(method_invocation name: (identifier) @ref)
(object_creation_expression type: (type_identifier) @ref)
(import_declaration (scoped_identifier) @ref)
(superclass (type_identifier) @ref)
(super_interfaces (type_list (type_identifier) @ref))
