-- lutra.loggers — lt.loggers (the namespace; its loggers are in this folder).
return require "lutra.loggers.csv"
