package discordfake

// memberOnSayLocked makes the author of a guild message a member of that
// guild (with no roles) when the configuration did not list them: on
// Discord only members write in a guild's channels.
func (s *Server) memberOnSayLocked(guild string, author User) {
	g := s.guilds[guild]
	if g == nil || author.Bot || author.ID == "" || author.ID == g.OwnerID {
		return
	}
	for _, m := range g.Members {
		if m.UserID == author.ID {
			return
		}
	}
	g.Members = append(g.Members, Member{UserID: author.ID})
}
