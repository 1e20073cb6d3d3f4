"""The one data model (Profile, Frame, CallTree), its pure views and its storage."""
