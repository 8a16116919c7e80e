class NIRRenderer: pass
