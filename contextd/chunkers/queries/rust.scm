; Names a Rust chunk uses: calls, macros, use paths, implemented traits.
(call_expression function: (identifier) @ref)
(call_expression function: (scoped_identifier name: (identifier) @ref))
(call_expression function: (field_expression field: (field_identifier) @ref))
(macro_invocation macro: (identifier) @ref)
(use_declaration argument: (_) @ref)
(impl_item trait: (type_identifier) @ref)
