package main

import "github.com/spf13/cobra"

// extraCommands are the service and maintenance commands.
func (a *app) extraCommands() []*cobra.Command {
	return []*cobra.Command{
		a.serveCommand(),
		a.demoCommand(),
		a.publishCommand(),
		a.eventsCommand(),
		a.replayCommand(),
		a.pruneCommand(),
		a.reconcileCommand(),
		a.verifyCommand(),
		a.healthCommand(),
		a.statusCommand(),
		a.historyCommand(),
		a.rollbackCommand(),
		a.unlockCommand(),
		a.doctorCommand(),
		a.notifyCommand(),
	}
}
