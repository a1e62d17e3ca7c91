const helper = require('./helper');
const { answer } = require('./lib/util');

exports.handler = async () => ({ helper: helper.shout('hello'), pkg: answer() });
