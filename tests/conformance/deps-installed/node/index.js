const tinydep = require('tinydep');

exports.handler = async () => tinydep.shout('installed');
