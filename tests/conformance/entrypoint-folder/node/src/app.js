const sibling = require('./sibling');
const shared = require('../shared');

exports.handler = async () => ({ sibling: sibling.NAME, root: shared.NAME });
