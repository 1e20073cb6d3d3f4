"""Small widgets shared by panes: header, key bar, breadcrumb, virtual table."""
