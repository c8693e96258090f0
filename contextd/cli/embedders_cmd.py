"""Placeholder until this command family lands."""

commands: list = []
